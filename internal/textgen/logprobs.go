package textgen

// The engine's logprob arrays (LogprobsLists: per generated token a row of token ids
// and logprobs, the sampled token first, then the top-k; the sampled token's rank)
// formatted as vLLM's OpenAI server formats them: the completions shape (tokens,
// token_logprobs, top_logprobs, text_offset) and the chat shape
// (content[{token, logprob, bytes, top_logprobs}]). Token strings are each id
// decoded alone with special tokens kept, as vLLM's convert_ids_list_to_tokens does.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/switchyard-llm/switchyard/wire"
)

// minLogprob is the floor vLLM puts on a logprob (-inf is not JSON).
const minLogprob = -9999.0

// Position is one generated token's logprobs: the sampled token first, then the
// top-k (a token may appear twice: sampled and among the top-k).
type Position struct {
	IDs      []int64
	Logprobs []float64
	Ranks    []int64 // the sampled token's rank, then the top-k's (1, 2, ...)
}

// Positions reads a LogprobsLists' rows.
func Positions(l *wire.LogprobsLists) ([]Position, error) {
	if l == nil {
		return nil, nil
	}
	ids, idShape, err := ints(&l.LogprobTokenIDs)
	if err != nil {
		return nil, fmt.Errorf("logprob_token_ids: %w", err)
	}
	lps, lpShape, err := floats(&l.Logprobs)
	if err != nil {
		return nil, fmt.Errorf("logprobs: %w", err)
	}
	ranks, _, err := ints(&l.SampledTokenRanks)
	if err != nil {
		return nil, fmt.Errorf("sampled_token_ranks: %w", err)
	}
	if len(idShape) != 2 || len(lpShape) != 2 || idShape[0] != lpShape[0] || idShape[1] != lpShape[1] {
		return nil, fmt.Errorf("logprob arrays of shapes %v and %v do not match", idShape, lpShape)
	}
	rows, cols := int(idShape[0]), int(idShape[1])
	out := make([]Position, rows)
	for r := range rows {
		// vLLM keys each position's logprobs by token id: a sampled token that is
		// also among the top-k is listed once, at its first place.
		// Python's dict keeps the first place and the last value (rank).
		var p Position
		for c := r * cols; c < (r+1)*cols; c++ {
			rank := int64(c - r*cols)
			if rank == 0 && r < len(ranks) {
				rank = ranks[r]
			}
			if k := slices.Index(p.IDs, ids[c]); k >= 0 {
				p.Ranks[k] = rank
				continue
			}
			p.IDs = append(p.IDs, ids[c])
			p.Logprobs = append(p.Logprobs, lps[c])
			p.Ranks = append(p.Ranks, rank)
		}
		out[r] = p
	}
	return out, nil
}

func shapeCount(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func ints(t *wire.Tensor) ([]int64, []int64, error) {
	n := shapeCount(t.Shape)
	var size int
	switch t.DType {
	case "int32", "int":
		size = 4
	case "int64", "long":
		size = 8
	default:
		return nil, nil, fmt.Errorf("dtype %q is not an integer type", t.DType)
	}
	if int64(len(t.Data)) != n*int64(size) {
		return nil, nil, fmt.Errorf("%d bytes for %d elements of %s", len(t.Data), n, t.DType)
	}
	out := make([]int64, n)
	for i := range out {
		if size == 4 {
			out[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[i*4:])))
		} else {
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[i*8:]))
		}
	}
	return out, t.Shape, nil
}

func floats(t *wire.Tensor) ([]float64, []int64, error) {
	n := shapeCount(t.Shape)
	var size int
	switch t.DType {
	case "float32", "float":
		size = 4
	case "float64", "double":
		size = 8
	default:
		return nil, nil, fmt.Errorf("dtype %q is not a float type", t.DType)
	}
	if int64(len(t.Data)) != n*int64(size) {
		return nil, nil, fmt.Errorf("%d bytes for %d elements of %s", len(t.Data), n, t.DType)
	}
	out := make([]float64, n)
	for i := range out {
		if size == 4 {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i*4:])))
		} else {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[i*8:]))
		}
	}
	return out, t.Shape, nil
}

func floor(x float64) float64 { return max(x, minLogprob) }

// CompletionLogprobs is vLLM's completions logprobs object.
type CompletionLogprobs struct {
	TextOffset    []int                 `json:"text_offset"`
	TokenLogprobs []*float64            `json:"token_logprobs"`
	Tokens        []string              `json:"tokens"`
	TopLogprobs   []map[string]float64  `json:"top_logprobs"`
	numTop        int                   // logprobs asked for
	next          int                   // text offset of the next token
	decode        func(id int64) string // one id, special tokens kept
}

// NewCompletionLogprobs starts the logprobs of one choice; initialOffset is where
// its text starts (the prompt's length with echo).
func NewCompletionLogprobs(decode func(int64) string, numTop, initialOffset int) *CompletionLogprobs {
	return &CompletionLogprobs{TextOffset: []int{}, TokenLogprobs: []*float64{}, Tokens: []string{},
		TopLogprobs: []map[string]float64{}, numTop: numTop, next: initialOffset, decode: decode}
}

// emptyDelta is a fresh delta object (lists empty, not null).
func emptyDelta() *CompletionLogprobs {
	return &CompletionLogprobs{TextOffset: []int{}, TokenLogprobs: []*float64{}, Tokens: []string{}, TopLogprobs: []map[string]float64{}}
}

// add appends one token to both c and its delta d.
func (c *CompletionLogprobs) add(d *CompletionLogprobs, token string, lp *float64, top map[string]float64) {
	d.Tokens = append(d.Tokens, token)
	d.TokenLogprobs = append(d.TokenLogprobs, lp)
	d.TopLogprobs = append(d.TopLogprobs, top)
	d.TextOffset = append(d.TextOffset, c.next)
	c.next += utf8.RuneCountInString(token)
	c.Tokens = append(c.Tokens, token)
	c.TokenLogprobs = append(c.TokenLogprobs, lp)
	c.TopLogprobs = append(c.TopLogprobs, top)
	c.TextOffset = append(c.TextOffset, d.TextOffset[len(d.TextOffset)-1])
}

// Add appends generated tokens with their positions (none: no logprobs) and
// returns the added part, for a stream's delta (appended to into when not nil).
func (c *CompletionLogprobs) Add(into *CompletionLogprobs, ids []int64, pos []Position) *CompletionLogprobs {
	d := into
	if d == nil {
		d = emptyDelta()
	}
	for i, id := range ids {
		token := c.decode(id)
		if i >= len(pos) || len(pos[i].IDs) == 0 {
			c.add(d, token, nil, nil)
			continue
		}
		p := pos[i]
		lp := floor(p.Logprobs[0])
		top := make(map[string]float64, len(p.IDs))
		for j, tid := range p.IDs {
			if j > c.numTop {
				break
			}
			top[c.decode(tid)] = floor(p.Logprobs[j])
		}
		c.add(d, token, &lp, top)
	}
	return d
}

// AddPrompt appends an echoed prompt's tokens with their prompt logprobs
// (entries[i] nil: none, as for the first token).
func (c *CompletionLogprobs) AddPrompt(into *CompletionLogprobs, ids []int64, entries []PromptEntry) *CompletionLogprobs {
	d := into
	if d == nil {
		d = emptyDelta()
	}
	for i, id := range ids {
		token := c.decode(id)
		if i >= len(entries) || entries[i] == nil {
			c.add(d, token, nil, nil)
			continue
		}
		e := entries[i]
		lp := e[0].Logprob
		top := make(map[string]float64, len(e))
		for j, p := range e {
			if j > c.numTop {
				break
			}
			top[p.DecodedToken] = p.Logprob
		}
		c.add(d, token, &lp, top)
	}
	return d
}

// ChatLogprob is one entry of a chat token's top_logprobs.
type ChatLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatLogprobContent is one generated token of a chat choice.
type ChatLogprobContent struct {
	ChatLogprob
	TopLogprobs []ChatLogprob `json:"top_logprobs"`
}

// ChatLogprobs is vLLM's chat choice logprobs object.
type ChatLogprobs struct {
	Content []ChatLogprobContent `json:"content"`
}

func utf8Bytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// ChatContent formats tokens as vLLM's _create_chat_logprobs: topN entries of
// top_logprobs (the sampled token first).
func ChatContent(decode func(int64) string, ids []int64, pos []Position, topN int) []ChatLogprobContent {
	out := make([]ChatLogprobContent, 0, len(ids))
	for i, id := range ids {
		token := decode(id)
		c := ChatLogprobContent{ChatLogprob: ChatLogprob{Token: token, Logprob: minLogprob, Bytes: utf8Bytes(token)}, TopLogprobs: []ChatLogprob{}}
		if i < len(pos) && len(pos[i].IDs) > 0 {
			p := pos[i]
			c.Logprob = floor(p.Logprobs[0])
			for j, tid := range p.IDs {
				if j >= topN {
					break
				}
				t := decode(tid)
				c.TopLogprobs = append(c.TopLogprobs, ChatLogprob{Token: t, Logprob: floor(p.Logprobs[j]), Bytes: utf8Bytes(t)})
			}
		}
		out = append(out, c)
	}
	return out
}

// PromptPositions reads prompt logprob rows (one per prompt token after the first).
func PromptPositions(t *wire.LogprobsTensors) ([]Position, error) {
	if t == nil {
		return nil, nil
	}
	return Positions(&wire.LogprobsLists{LogprobTokenIDs: t.LogprobTokenIDs, Logprobs: t.Logprobs, SampledTokenRanks: t.SelectedTokenRanks})
}

// PromptLogprob is one token of a prompt_logprobs entry, vLLM's Logprob.
type PromptLogprob struct {
	ID           int64
	Logprob      float64
	Rank         int64
	DecodedToken string
}

// PromptEntry is one prompt position of prompt_logprobs: {token id: {logprob,
// rank, decoded_token}} in vLLM's order (the prompt token, then the top-k); nil is
// the first position's null.
type PromptEntry []PromptLogprob

// MarshalJSON writes the entry as an object keyed by token id, in order.
func (e PromptEntry) MarshalJSON() ([]byte, error) {
	if e == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, p := range e {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, p.ID, 10)
		b = append(b, `":{"logprob":`...)
		b = strconv.AppendFloat(b, p.Logprob, 'g', -1, 64)
		b = append(b, `,"rank":`...)
		b = strconv.AppendInt(b, p.Rank, 10)
		b = append(b, `,"decoded_token":`...)
		tok, err := json.Marshal(p.DecodedToken)
		if err != nil {
			return nil, err
		}
		b = append(append(b, tok...), '}')
	}
	return append(b, '}'), nil
}

// PromptEntries formats prompt logprob rows (vLLM's _make_logprob_dict: the prompt
// token with its rank, then the top-k with ranks 1..k; a token listed twice keeps
// its first place).
func PromptEntries(decode func(int64) string, pos []Position) []PromptEntry {
	out := make([]PromptEntry, len(pos))
	for i, p := range pos {
		e := make(PromptEntry, len(p.IDs))
		for j, id := range p.IDs {
			e[j] = PromptLogprob{ID: id, Logprob: floor(p.Logprobs[j]), Rank: p.Ranks[j], DecodedToken: decode(id)}
		}
		out[i] = e
	}
	return out
}
