package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

func smallMultiTurn() KVWorkloadConfig {
	c := DefaultKVWorkload(WorkloadMultiTurn)
	c.Conversations, c.Turns, c.Prefixes, c.PrefixTokens, c.FirstTokens = 6, 3, 2, 64, 40
	c.UserTokens, c.AnswerTokens = 20, 12
	return c
}

func TestKVWorkloadDeterministic(t *testing.T) {
	for _, kind := range []string{WorkloadMultiTurn, WorkloadSharedPrefix} {
		c := DefaultKVWorkload(kind)
		a, err := NewKVWorkload(c)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewKVWorkload(c)
		for i := range a.Requests {
			ra, rb := a.Requests[i], b.Requests[i]
			if !slices.Equal(ra.Prompt, rb.Prompt) || ra.Delay != rb.Delay || ra.OracleHit != rb.OracleHit {
				t.Fatalf("%s: request %d differs between two builds of one seed", kind, i)
			}
		}
		c.Seed++
		d, _ := NewKVWorkload(c)
		if slices.Equal(a.Requests[0].Prompt, d.Requests[0].Prompt) {
			t.Errorf("%s: seeds %d and %d gave the same first prompt", kind, c.Seed-1, c.Seed)
		}
	}
}

// Each turn's prompt extends the previous turn's prompt and answer by a user
// message, and the answer is the mock engine's.
func TestKVWorkloadTurns(t *testing.T) {
	c := smallMultiTurn()
	w, err := NewKVWorkload(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != c.Conversations*c.Turns {
		t.Fatalf("%d requests, want %d", len(w.Requests), c.Conversations*c.Turns)
	}
	for conv := range c.Conversations {
		turns := w.Conversation(conv)
		if len(turns[0].Prompt) != c.PrefixTokens+c.FirstTokens {
			t.Errorf("conversation %d: first prompt %d tokens", conv, len(turns[0].Prompt))
		}
		for i, r := range turns {
			if r.Conv != conv || r.Turn != i {
				t.Fatalf("conversation %d turn %d is labelled %d/%d", conv, i, r.Conv, r.Turn)
			}
			if !slices.Equal(r.Answer, mockengine.TokensFor(r.Prompt, c.AnswerTokens)) {
				t.Errorf("conversation %d turn %d: answer is not the mock engine's", conv, i)
			}
			if i == 0 {
				continue
			}
			prev := turns[i-1]
			want := slices.Concat(prev.Prompt, prev.Answer)
			if len(r.Prompt) != len(want)+c.UserTokens || !slices.Equal(r.Prompt[:len(want)], want) {
				t.Errorf("conversation %d turn %d does not extend the previous turn", conv, i)
			}
			if r.At < prev.At {
				t.Errorf("conversation %d turn %d arrives before its previous turn", conv, i)
			}
		}
	}
	// Conversations sharing a system prompt start alike; others do not.
	p0, p1, p2 := w.Conversation(0)[0].Prompt, w.Conversation(1)[0].Prompt, w.Conversation(2)[0].Prompt
	if !slices.Equal(p0[:c.PrefixTokens], p2[:c.PrefixTokens]) || slices.Equal(p0[:c.PrefixTokens], p1[:c.PrefixTokens]) {
		t.Error("conversation i should open with system prompt i mod Prefixes")
	}
	// The order is a permutation sorted by nominal arrival.
	seen := map[int]bool{}
	for k, i := range w.Order {
		seen[i] = true
		if k > 0 && w.Requests[w.Order[k-1]].At > w.Requests[i].At {
			t.Fatalf("order is not sorted by arrival at %d", k)
		}
	}
	if len(seen) != len(w.Requests) {
		t.Fatalf("order covers %d of %d requests", len(seen), len(w.Requests))
	}
}

func TestKVWorkloadSharedPrefix(t *testing.T) {
	c := DefaultKVWorkload(WorkloadSharedPrefix)
	w, err := NewKVWorkload(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != c.Conversations {
		t.Fatalf("%d requests, want %d", len(w.Requests), c.Conversations)
	}
	for i, r := range w.Requests {
		if r.Turn != 0 || len(r.Prompt) != c.PrefixTokens+c.FirstTokens {
			t.Fatalf("request %d: turn %d, %d tokens", i, r.Turn, len(r.Prompt))
		}
	}
	// Every request after the first of its prefix hits the whole prefix at most.
	if got, most := w.OracleHitRatio(), float64(c.PrefixTokens)/float64(c.PrefixTokens+c.FirstTokens); got > most || got < 0.8*most {
		t.Errorf("oracle hit ratio %.3f, want a little under %.3f", got, most)
	}
}

// The oracle on a hand-made case: block size 4.
func TestPrefixOracle(t *testing.T) {
	seq := func(from, n int) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(from + i)
		}
		return s
	}
	reqs := []KVRequest{
		{Prompt: seq(0, 10), Answer: seq(100, 3)},                     // nothing cached yet
		{Prompt: slices.Concat(seq(0, 10), seq(100, 3), seq(200, 3))}, // the previous prompt and answer
		{Prompt: seq(0, 8)},                                                         // all cached, but never the last token's block
		{Prompt: slices.Concat(seq(0, 6), seq(300, 6))},                             // diverges inside the second block
		{Prompt: seq(50, 9), At: -time.Second},                                      // first in arrival order
		{Prompt: slices.Concat(seq(50, 9), []int64{9004}, seq(60, 6)), At: 1 << 40}, // last: the answer's last token is not cached
	}
	for i := range reqs {
		if reqs[i].Answer == nil {
			reqs[i].Answer = []int64{int64(9000 + i)}
		}
	}
	order := arrivalOrder(reqs)
	if order[0] != 4 || order[len(order)-1] != 5 {
		t.Fatalf("order %v", order)
	}
	prompt, hit, blocks := runOracle(reqs, order, 4)
	// Request 0 leaves 0..9,100,101 cached (its answer's last token, 102, is not), so
	// request 1 hits 0-3, 4-7, 8,9,100,101 and misses 102,200,201,202. Request 4
	// leaves 50-53 and 54-57 (58 and its answer make no full block without the
	// answer's last token), so request 5 hits those two.
	want := []int{0, 12, 4, 4, 0, 8}
	for i, r := range reqs {
		if r.OracleHit != want[i] {
			t.Errorf("request %d: oracle hit %d, want %d", i, r.OracleHit, want[i])
		}
	}
	if prompt != 10+16+8+12+9+16 || hit != 28 {
		t.Errorf("prompt %d hit %d", prompt, hit)
	}
	if blocks == 0 {
		t.Error("no working set")
	}
}

func TestKVWorkloadValidate(t *testing.T) {
	c := DefaultKVWorkload("chat")
	if _, err := NewKVWorkload(c); err == nil {
		t.Error("an unknown workload was accepted")
	}
	c = DefaultKVWorkload(WorkloadSharedPrefix)
	c.Turns = 3
	if _, err := NewKVWorkload(c); err == nil {
		t.Error("a shared-prefix workload with turns was accepted")
	}
}
