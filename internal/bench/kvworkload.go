package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// The cache-aware routing workloads (`bench --workload multi-turn|shared-prefix`): a
// fixed, seeded set of requests whose prompts share prefixes the way chat and RAG
// traffic does, replayed unchanged against each routing policy. Building one does no
// IO: the answers are the ones a mock engine gives (mockengine.TokensFor), so the
// next turn's prompt, the oracle and the working set are known before the run.

// Workload names.
const (
	WorkloadMultiTurn    = "multi-turn"
	WorkloadSharedPrefix = "shared-prefix"
)

// KVWorkloadConfig shapes a workload. Multi-turn: Conversations conversations, each
// opening with one of Prefixes shared system prompts (PrefixTokens each, conversation
// i takes prompt i mod Prefixes, so every prompt has the same share) and a first user
// message of FirstTokens of its own (a pasted document), then Turns turns where each
// prompt is the previous prompt, the previous answer and a new user message of
// UserTokens. Shared-prefix: Conversations one-shot requests, each one of Prefixes
// long shared prefixes (a RAG document, a system prompt), drawn uniformly, followed by
// FirstTokens of its own.
type KVWorkloadConfig struct {
	Kind          string `json:"kind"`
	Seed          uint64 `json:"seed"`
	BlockSize     int    `json:"block_size"`
	Conversations int    `json:"conversations"` // shared-prefix: requests
	Turns         int    `json:"turns"`         // shared-prefix: 1
	Prefixes      int    `json:"prefixes"`
	PrefixTokens  int    `json:"prefix_tokens"`
	FirstTokens   int    `json:"first_tokens"`
	UserTokens    int    `json:"user_tokens"`
	AnswerTokens  int    `json:"answer_tokens"`
	// Think is the mean of the exponential pause between a turn's answer and the
	// next turn (multi-turn).
	Think time.Duration `json:"think_ns"`
	// Rate is how many conversations (shared-prefix: requests) start per second,
	// Poisson; 0 starts them all at once.
	Rate float64 `json:"rate"`
}

// DefaultKVWorkload is the workload the README quotes for kind. Multi-turn: 32
// conversations of 8 turns over 4 system prompts of 512 tokens, each opening with a
// 2,048-token document, 64-token user messages and 128-token answers, so most of a
// prompt is its own conversation's history, which only the engine that served the
// previous turn holds: the system prompts, which every engine soon holds, are 16% of
// the prompt tokens. Shared-prefix: 256 requests over 16 prefixes of 1,024 tokens
// with 64-token suffixes.
func DefaultKVWorkload(kind string) KVWorkloadConfig {
	c := KVWorkloadConfig{Kind: kind, Seed: 1, BlockSize: mockengine.DefaultBlockSize, Prefixes: 4, PrefixTokens: 512,
		Conversations: 32, Turns: 8, FirstTokens: 2048, UserTokens: 64, AnswerTokens: 128,
		Think: 100 * time.Millisecond, Rate: 40}
	if kind == WorkloadSharedPrefix {
		c.Conversations, c.Turns, c.Prefixes, c.PrefixTokens = 256, 1, 16, 1024
		c.FirstTokens, c.UserTokens, c.AnswerTokens, c.Think, c.Rate = 64, 0, 16, 0, 100
	}
	return c
}

// Validate names the first field at fault.
func (c *KVWorkloadConfig) Validate() error {
	bad := func(field, why string) error { return &ConfigError{Field: field, Msg: why} }
	switch {
	case c.Kind != WorkloadMultiTurn && c.Kind != WorkloadSharedPrefix:
		return bad("workload", fmt.Sprintf("want %s or %s, got %q", WorkloadMultiTurn, WorkloadSharedPrefix, c.Kind))
	case c.BlockSize < 1:
		return bad("block_size", "must be at least 1")
	case c.Conversations < 1:
		return bad("conversations", "must be at least 1")
	case c.Turns < 1 || (c.Kind == WorkloadSharedPrefix && c.Turns != 1):
		return bad("turns", "must be at least 1 (shared-prefix: exactly 1)")
	case c.Prefixes < 1 || c.PrefixTokens < 0 || c.FirstTokens < 0 || c.UserTokens < 0:
		return bad("prefixes", "needs at least one prefix and no negative lengths")
	case c.PrefixTokens+c.FirstTokens < 1:
		return bad("prefix_tokens", "a prompt needs at least one token")
	case c.AnswerTokens < 1:
		return bad("answer_tokens", "must be at least 1")
	case c.Think < 0 || c.Rate < 0:
		return bad("think", "think time and rate must not be negative")
	}
	return nil
}

// KVRequest is one request of a workload.
type KVRequest struct {
	Conv, Turn int
	Prompt     []int64
	// Answer is what a mock engine answers Prompt with AnswerTokens and ignore_eos;
	// the conversation's next prompt carries it.
	Answer []int64
	// Delay is how long after the run starts (turn 0) or after the previous turn
	// finished (later turns) the request is sent.
	Delay time.Duration
	// At is the nominal arrival (start plus the think times, no service time): the
	// order the oracle reads the workload in.
	At time.Duration
	// OracleHit is the prompt tokens an unbounded cache shared by every engine holds
	// when the request arrives (whole blocks).
	OracleHit int
}

// KVWorkload is a generated workload.
type KVWorkload struct {
	Config KVWorkloadConfig
	// Requests hold conversation c's turns at c*Turns ... c*Turns+Turns-1.
	Requests []KVRequest
	// Order is Requests' indices in nominal arrival order.
	Order            []int
	PromptTokens     int64
	OracleHitTokens  int64
	WorkingSetBlocks int // distinct full blocks of every prompt and answer
}

// Conversation is conversation c's turns, in order.
func (w *KVWorkload) Conversation(c int) []KVRequest {
	t := w.Config.Turns
	return w.Requests[c*t : c*t+t]
}

// OracleHitRatio is the share of prompt tokens an unbounded cache shared by every
// engine would have held: an upper bound no routing can beat.
func (w *KVWorkload) OracleHitRatio() float64 {
	if w.PromptTokens == 0 {
		return 0
	}
	return float64(w.OracleHitTokens) / float64(w.PromptTokens)
}

// BlocksPerEngine is the cache capacity that holds share of the working set (at
// least one block).
func (w *KVWorkload) BlocksPerEngine(share float64) int {
	return max(1, int(float64(w.WorkingSetBlocks)*share+0.5))
}

// NewKVWorkload generates the workload of c; the same config gives the same
// requests.
func NewKVWorkload(c KVWorkloadConfig) (*KVWorkload, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &kvGen{c: c, rng: rand.New(rand.NewPCG(c.Seed, 0x4b56_574f_524b))}
	var starts *Arrivals
	if c.Rate > 0 {
		starts = NewArrivals(c.Rate, c.Seed)
	}
	prefixes := make([][]int64, c.Prefixes)
	for i := range prefixes {
		prefixes[i] = g.tokens(c.PrefixTokens)
	}
	w := &KVWorkload{Config: c, Requests: make([]KVRequest, 0, c.Conversations*c.Turns)}
	for conv := range c.Conversations {
		var start time.Duration
		if starts != nil {
			start = starts.Next()
		}
		w.Requests = append(w.Requests, g.conversation(conv, start, prefixes)...)
	}
	w.Order = arrivalOrder(w.Requests)
	w.PromptTokens, w.OracleHitTokens, w.WorkingSetBlocks = runOracle(w.Requests, w.Order, c.BlockSize)
	return w, nil
}

// kvGen draws a workload's tokens from one seeded source.
type kvGen struct {
	c   KVWorkloadConfig
	rng *rand.Rand
}

// tokens are n token ids in the mock engine's vocabulary; random 16-token blocks
// of 30,000 ids never repeat by chance, so only the shared prefixes are shared.
func (g *kvGen) tokens(n int) []int64 {
	t := make([]int64, n)
	for i := range t {
		t[i] = 100 + g.rng.Int64N(30000)
	}
	return t
}

// conversation is one conversation's turns, starting at start.
func (g *kvGen) conversation(conv int, start time.Duration, prefixes [][]int64) []KVRequest {
	c := g.c
	prefix := prefixes[conv%len(prefixes)]
	if c.Kind == WorkloadSharedPrefix {
		prefix = prefixes[g.rng.IntN(len(prefixes))]
	}
	prompt := slices.Concat(prefix, g.tokens(c.FirstTokens))
	out := make([]KVRequest, c.Turns)
	at, delay := start, start
	for t := range out {
		if t > 0 {
			prev := out[t-1]
			prompt = slices.Concat(prev.Prompt, prev.Answer, g.tokens(c.UserTokens))
			delay = time.Duration(g.rng.ExpFloat64() * float64(c.Think))
			at += delay
		}
		out[t] = KVRequest{Conv: conv, Turn: t, Prompt: prompt, Answer: mockengine.TokensFor(prompt, c.AnswerTokens),
			Delay: delay, At: at}
	}
	return out
}

// arrivalOrder sorts request indices by nominal arrival; ties keep conversation
// and turn order.
func arrivalOrder(reqs []KVRequest) []int {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case reqs[a].At < reqs[b].At:
			return -1
		case reqs[a].At > reqs[b].At:
			return 1
		}
		return 0
	})
	return order
}

// runOracle sets each request's OracleHit, reading them in order, and returns the
// prompt tokens, the hit tokens and the working set in blocks.
func runOracle(reqs []KVRequest, order []int, blockSize int) (prompt, hit int64, blocks int) {
	o := newPrefixOracle(blockSize)
	for _, i := range order {
		r := &reqs[i]
		r.OracleHit = o.lookup(r.Prompt)
		o.store(r.Prompt, r.Answer)
		prompt += int64(len(r.Prompt))
		hit += int64(r.OracleHit)
	}
	return prompt, hit, len(o.seen)
}

// prefixOracle is an unbounded prefix cache shared by every engine: the most any
// routing could hit. It counts as a vLLM engine does: whole blocks only, never the
// block of a prompt's last token, and a finished request's prompt and answer but
// the answer's last token (whose KV is never computed).
type prefixOracle struct {
	bs   int
	seen map[uint64]struct{}
}

func newPrefixOracle(blockSize int) *prefixOracle {
	return &prefixOracle{bs: blockSize, seen: map[uint64]struct{}{}}
}

// chain is the hash of each full block of seq, each chaining its parent, so a
// block matches only after the same prefix.
func (o *prefixOracle) chain(seq []int64) []uint64 {
	hs := make([]uint64, 0, len(seq)/o.bs)
	var parent uint64
	for i := 0; i+o.bs <= len(seq); i += o.bs {
		parent = mockengine.BlockHash(parent, seq[i:i+o.bs], nil)
		hs = append(hs, parent)
	}
	return hs
}

// lookup is the tokens of prompt the cache holds.
func (o *prefixOracle) lookup(prompt []int64) int {
	if len(prompt) == 0 {
		return 0
	}
	limit := (len(prompt) - 1) / o.bs
	n := 0
	for _, h := range o.chain(prompt)[:limit] {
		if _, ok := o.seen[h]; !ok {
			break
		}
		n++
	}
	return n * o.bs
}

// store caches what a finished request leaves behind.
func (o *prefixOracle) store(prompt, answer []int64) {
	seq := slices.Concat(prompt, answer)
	for _, h := range o.chain(seq[:len(seq)-1]) {
		o.seen[h] = struct{}{}
	}
}
