package textgen

// The engine's logprob arrays (LogprobsLists: per generated token a row of token ids
// and logprobs, the sampled token first, then the top-k; the sampled token's rank)
// formatted as vLLM's OpenAI server formats them: the completions shape (tokens,
// token_logprobs, top_logprobs, text_offset) and the chat shape
// (content[{token, logprob, bytes, top_logprobs}]). Token strings are each id
// decoded alone with special tokens kept, as vLLM's convert_ids_list_to_tokens does.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/switchyard-llm/switchyard/wire"
)

// minLogprob is the floor vLLM puts on a logprob (-inf is not JSON).
const minLogprob = -9999.0

// Position is one generated token's logprobs: the sampled token first, then the
// top-k (a token may appear twice: sampled and among the top-k).
type Position struct {
	IDs      []int64
	Logprobs []float64
	Rank     int64 // the sampled token's rank
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
		var p Position
		for c := r * cols; c < (r+1)*cols; c++ {
			if !slices.Contains(p.IDs, ids[c]) {
				p.IDs = append(p.IDs, ids[c])
				p.Logprobs = append(p.Logprobs, lps[c])
			}
		}
		if r < len(ranks) {
			p.Rank = ranks[r]
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

// Add appends tokens with their positions (nil: no logprobs, as for an echoed
// prompt's first token). It returns the added part, for a stream's delta.
func (c *CompletionLogprobs) Add(ids []int64, pos []Position) *CompletionLogprobs {
	d := &CompletionLogprobs{TextOffset: []int{}, TokenLogprobs: []*float64{}, Tokens: []string{}, TopLogprobs: []map[string]float64{}}
	for i, id := range ids {
		token := c.decode(id)
		d.Tokens = append(d.Tokens, token)
		if i >= len(pos) || len(pos[i].IDs) == 0 {
			d.TokenLogprobs = append(d.TokenLogprobs, nil)
			d.TopLogprobs = append(d.TopLogprobs, nil)
		} else {
			p := pos[i]
			lp := floor(p.Logprobs[0])
			d.TokenLogprobs = append(d.TokenLogprobs, &lp)
			top := make(map[string]float64, len(p.IDs))
			for j, tid := range p.IDs {
				if j > c.numTop {
					break
				}
				top[c.decode(tid)] = floor(p.Logprobs[j])
			}
			d.TopLogprobs = append(d.TopLogprobs, top)
		}
		d.TextOffset = append(d.TextOffset, c.next)
		c.next += len([]rune(token))
	}
	c.Tokens = append(c.Tokens, d.Tokens...)
	c.TokenLogprobs = append(c.TokenLogprobs, d.TokenLogprobs...)
	c.TopLogprobs = append(c.TopLogprobs, d.TopLogprobs...)
	c.TextOffset = append(c.TextOffset, d.TextOffset...)
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
