package e2e

// The chaos test: four mock-engine processes under a steady load of
// streaming and non-streaming completions over HTTP and requests over the msgpack
// client protocol, and a fault every few hundred ms chosen at random: SIGKILL, or a
// fault the engine triggers on a signal (ENGINE_CORE_DEAD, garbage output, a
// stall), each followed by a restart that rejoins, while at least one rank stays
// up. Every request must finish exactly once with exactly its max_tokens tokens,
// equal to the uninterrupted sequence (the mock's tokens follow the sequence, so a
// migrated request continues it exactly), and the server's goroutines and fds
// must come back to the baseline. Figures go to the test log:
//
//	go test -v -run Chaos ./e2e/

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

const (
	chaosRanks    = 4
	chaosDuration = 40 * time.Second // of faults; the whole test stays under 90 s
	chaosGap      = 250 * time.Millisecond
)

// chaosTally counts requests and keeps the first few failures.
type chaosTally struct {
	sent, ok atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (c *chaosTally) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// chaosPrompt is request i's prompt: varied, so streams differ.
func chaosPrompt(worker, i int) []int64 {
	return []int64{int64(worker + 1), int64(i%97 + 1), int64(i/97 + 1), 7}
}

func jsonInts(v []int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// chaosHTTP runs one HTTP worker until ctx ends: completions of 8..40 tokens,
// streaming or not.
func chaosHTTP(ctx context.Context, s *server, worker int, stream bool, tally *chaosTally) {
	rng := rand.New(rand.NewPCG(uint64(worker), 1))
	for i := 0; ctx.Err() == nil; i++ {
		prompt := chaosPrompt(worker, i)
		n := 8 + rng.IntN(33)
		body := fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "stream": %v, "stream_options": {"include_usage": true}}`, jsonInts(prompt), n, stream)
		if !stream {
			body = fmt.Sprintf(`{"prompt": %s, "max_tokens": %d}`, jsonInts(prompt), n)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tally.sent.Add(1)
		resp, b, err := s.post(rctx, body)
		cancel()
		id := fmt.Sprintf("http-%d-%d", worker, i)
		if err != nil || resp.StatusCode != 200 {
			tally.fail("%s: %v %v %.300s", id, err, resp, b)
			continue
		}
		var toks []int64
		var finish string
		var usage [2]int
		if stream {
			// Folded here, not with foldStream: this is not the test's goroutine.
			var bad []string
			done := false
			for _, d := range sse(b) {
				var c completion
				switch {
				case d == "[DONE]":
					done = true
				case json.Unmarshal([]byte(d), &c) != nil:
					bad = append(bad, "undecodable chunk "+d)
				case c.Error != nil:
					bad = append(bad, c.Error.Message)
				default:
					for _, ch := range c.Choices {
						toks = append(toks, ch.TokenIDs...)
						if ch.FinishReason != nil {
							finish = *ch.FinishReason
						}
					}
					if c.Usage != nil {
						usage = [2]int{c.Usage.PromptTokens, c.Usage.CompletionTokens}
					}
				}
			}
			if len(bad) > 0 || !done {
				tally.fail("%s: stream errors %v done %v", id, bad, done)
				continue
			}
		} else {
			var c completion
			if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 || c.Usage == nil {
				tally.fail("%s: answer %.300s", id, b)
				continue
			}
			toks, usage = c.Choices[0].TokenIDs, [2]int{c.Usage.PromptTokens, c.Usage.CompletionTokens}
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
		if want := mockengine.TokensFor(prompt, n); !slices.Equal(toks, want) || finish != "length" || usage != [2]int{len(prompt), n} {
			tally.fail("%s (stream %v): %d tokens finish %q usage %v; want the %d uninterrupted tokens, usage [%d %d]; equal %v",
				id, stream, len(toks), finish, usage, n, len(prompt), n, slices.Equal(toks, want))
			continue
		}
		tally.ok.Add(1)
	}
}

// chaosClient runs one msgpack client until ctx ends: batches of 8 requests,
// each checked for its exact tokens and a single finish.
func chaosClient(ctx context.Context, c *msgClient, worker int, tally *chaosTally) {
	rng := rand.New(rand.NewPCG(uint64(worker), 2))
	for batch := 0; ctx.Err() == nil; batch++ {
		type live struct {
			prompt   []int64
			n        int
			toks     []int64
			finished int
		}
		reqs := map[string]*live{}
		for j := range 8 {
			i := batch*8 + j
			id := fmt.Sprintf("mp-%d-%d", worker, i)
			q := &live{prompt: chaosPrompt(worker, i), n: 8 + rng.IntN(33)}
			reqs[id] = q
			sp := wire.DefaultSamplingParams()
			sp.MaxTokens = wire.SomeInt(int64(q.n))
			sp.IgnoreEOS = true
			sp.Normalize()
			body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: q.prompt, Sampling: &sp})
			if err != nil {
				tally.fail("%s: encoding: %v", id, err)
				return
			}
			tally.sent.Add(1)
			if err := c.sock.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
				tally.fail("%s: send: %v", id, err)
				delete(reqs, id)
			}
		}
		open := len(reqs)
		deadline := time.After(30 * time.Second)
		for open > 0 {
			select {
			case m := <-c.in:
				if len(m[0]) > 0 && m[0][0]&0xf0 == 0x80 {
					var e map[string]any
					_ = msgpack.Unmarshal(m[0], &e)
					id, _ := e["request_id"].(string)
					if q, ok := reqs[id]; ok && q.finished == 0 {
						q.finished = -1
						open--
					}
					tally.fail("msgpack %s: error %v", id, e)
					continue
				}
				var o wire.EngineCoreOutputs
				if err := wire.DecodeOutputs(m, &o); err != nil {
					tally.fail("msgpack: undecodable outputs: %v", err)
					continue
				}
				for _, out := range o.Outputs {
					q, ok := reqs[out.RequestID]
					if !ok {
						tally.fail("msgpack: output for unknown id %q", out.RequestID)
						continue
					}
					if q.finished != 0 {
						tally.fail("msgpack %s: output after its end", out.RequestID)
						continue
					}
					q.toks = append(q.toks, out.NewTokenIDs...)
					if out.Finished() {
						q.finished = 1
						open--
						if want := mockengine.TokensFor(q.prompt, q.n); !slices.Equal(q.toks, want) || out.FinishReason != wire.FinishLength {
							tally.fail("msgpack %s: %d tokens finish %v, want the %d uninterrupted tokens (equal %v)",
								out.RequestID, len(q.toks), out.FinishReason, q.n, slices.Equal(q.toks, want))
						} else {
							tally.ok.Add(1)
						}
					}
				}
			case <-deadline:
				tally.fail("msgpack worker %d: %d requests unfinished after 30 s", worker, open)
				return
			}
		}
	}
}

// chaosRank is one rank's current engine process.
type chaosRank struct {
	mu   sync.Mutex
	p    *proc
	down bool // struck and not yet restarted
}

func TestChaosMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run takes about a minute")
	}
	began := time.Now()
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", strconv.Itoa(chaosRanks),
		"--engine-transport", "tcp", "--engine-stall-timeout", chaosStall.String(), "--max-migrations", "8")
	ranks := make([]*chaosRank, chaosRanks)
	for r := range ranks {
		ranks[r] = &chaosRank{p: startEngine(t, s.handshake, r, chaosRanks)}
	}
	eventually(t, 30*time.Second, "every engine ready", func() bool {
		for r := range chaosRanks {
			if !ready(t, s, r) {
				return false
			}
		}
		return true
	})
	mc := dialClient(t, s.client, "chaos")
	if f := mc.run(t, "warm", 8, 3); f > 0 {
		t.Fatalf("warm-up: %d failed", f)
	}
	pid := s.cmd.Process.Pid
	base := sampleResources(t, pid, s.url("/metrics"))

	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var tally chaosTally
	var load sync.WaitGroup
	for w := range 4 {
		load.Go(func() { chaosHTTP(loadCtx, s, w, false, &tally) })
		load.Go(func() { chaosHTTP(loadCtx, s, 10+w, true, &tally) })
	}
	clients := []*msgClient{mc}
	for w := 1; w < 3; w++ {
		clients = append(clients, dialClient(t, s.client, fmt.Sprint("chaos-", w)))
	}
	for w, c := range clients {
		load.Go(func() { chaosClient(loadCtx, c, 20+w, &tally) })
	}

	// The faults: pick a rank that is up while another one is too, strike it, and
	// restart it in the background once it is gone.
	kinds := []string{"sigkill", "dead", "garbage", "stall"}
	faults := map[string]int{}
	var restarts sync.WaitGroup
	var restartFails atomic.Int64
	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 3))
	t.Logf("chaos seed %d", began.UnixNano())
	end := time.Now().Add(chaosDuration)
	for time.Now().Before(end) {
		time.Sleep(chaosGap/2 + time.Duration(rng.Int64N(int64(chaosGap))))
		var up []int
		for r, cr := range ranks {
			cr.mu.Lock()
			if !cr.down {
				up = append(up, r)
			}
			cr.mu.Unlock()
		}
		if len(up) < 2 {
			continue // keep one rank alive
		}
		r := up[rng.IntN(len(up))]
		kind := kinds[rng.IntN(len(kinds))]
		cr := ranks[r]
		cr.mu.Lock()
		cr.down = true
		victim := cr.p
		cr.mu.Unlock()
		faults[kind]++
		switch kind {
		case "sigkill":
			_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		case "dead":
			_ = victim.cmd.Process.Signal(syscall.SIGUSR1)
		case "garbage":
			_ = victim.cmd.Process.Signal(syscall.SIGUSR2)
		case "stall":
			_ = victim.cmd.Process.Signal(syscall.SIGHUP)
		}
		restarts.Go(func() {
			// Garbage and stall leave the process running: give the server time
			// to notice (the stall timeout), then kill it. A dead engine exits.
			select {
			case <-victim.done:
			case <-time.After(chaosStall + 300*time.Millisecond):
				_ = victim.cmd.Process.Signal(syscall.SIGKILL)
				<-victim.done
			}
			// The server must have seen the old engine go before "ready" can
			// mean the new one: on a loaded machine it reads the old one's
			// ENGINE_CORE_DEAD or EOF a few hundred ms after the process is
			// gone, and a rank still ready from the old engine would let the
			// picker strike the last rank that is really up.
			gone := time.Now().Add(10 * time.Second)
			for chaosReady(s, r) && time.Now().Before(gone) {
				time.Sleep(10 * time.Millisecond)
			}
			p := startEngine(t, s.handshake, r, chaosRanks)
			deadline := time.Now().Add(20 * time.Second)
			ok := true
			for !chaosReady(s, r) {
				if time.Now().After(deadline) {
					restartFails.Add(1)
					ok = false
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			// A rank that did not come back stays "down" for the fault picker, so
			// the last rank that is really up is never struck.
			cr.mu.Lock()
			cr.p, cr.down = p, !ok
			cr.mu.Unlock()
		})
	}
	testwait.Wait(t, &restarts, "the engine restarts")
	stopLoad()
	testwait.Wait(t, &load, "the load generators to stop")
	total := 0
	for _, n := range faults {
		total += n
	}

	// Figures from the server's metrics.
	metrics := scrape(t, s.url("/metrics"))
	moved := metricSum(metrics, "switchyard_migrations_total", `outcome="moved"`)
	notMoved := metricSum(metrics, "switchyard_migrations_total", "") - moved
	saved := metricSum(metrics, "switchyard_migrated_requests_finished_total", "")
	p99 := histQuantile(metrics, "switchyard_migration_delay_seconds", 0.99)
	p50 := histQuantile(metrics, "switchyard_migration_delay_seconds", 0.50)

	after := settle(t, pid, s.url("/metrics"), base, 20*time.Second, 256<<20, 8, 20)
	t.Logf("CHAOS faults=%d %v restarts_not_rejoined=%d requests=%d ok=%d failed=%d migrations_moved=%.0f not_moved=%.0f saved=%.0f move_delay_p50=%.1fms p99=%.1fms elapsed=%v",
		total, faults, restartFails.Load(), tally.sent.Load(), tally.ok.Load(), len(tally.failures), moved, notMoved, saved, p50*1e3, p99*1e3, time.Since(began).Round(time.Second))
	t.Logf("CHAOS resources before[%v] after[%v]", base, after)
	for i, f := range tally.failures {
		if i == 20 {
			t.Errorf("... and %d more failures", len(tally.failures)-20)
			break
		}
		t.Errorf("failed: %s", f)
	}
	if tally.sent.Load() != tally.ok.Load()+int64(len(tally.failures)) && len(tally.failures) == 0 {
		t.Errorf("%d requests sent, %d ok, none failed: some never ended", tally.sent.Load(), tally.ok.Load())
	}
	if moved == 0 {
		t.Error("no request was migrated: the faults never hit a loaded engine?")
	}
	if total < 100 {
		t.Logf("CHAOS only %d faults in %v (goal: 100): ranks were slow to rejoin", total, chaosDuration)
	}
}

// chaosStall is the server's --engine-stall-timeout in the chaos run: long enough
// that a healthy engine on a loaded 2-core CI machine (race detector, other
// packages' tests) is not taken for stalled, which would leave no rank routable;
// short enough that a stall fault is noticed within the run.
const chaosStall = 1500 * time.Millisecond

// chaosReady is ready for goroutines other than the test's: an error is "not yet".
func chaosReady(s *server, rank int) bool {
	resp, err := httpc.Get(s.url("/v1/engines"))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v struct {
		Engines []engine `json:"engines"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return false
	}
	for _, e := range v.Engines {
		if e.Rank == rank {
			return e.Ready
		}
	}
	return false
}

// scrape returns /metrics as lines.
func scrape(t *testing.T, url string) []string {
	t.Helper()
	resp, err := httpc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// metricSum adds the samples of name whose labels contain match.
func metricSum(lines []string, name, match string) float64 {
	var sum float64
	for _, l := range lines {
		if !strings.HasPrefix(l, name) || strings.HasPrefix(l, "#") {
			continue
		}
		rest := l[len(name):]
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // a longer name
		}
		if match != "" && !strings.Contains(rest, match) {
			continue
		}
		f := strings.Fields(l)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// histQuantile estimates quantile q of a histogram from its cumulative buckets
// (the upper bound of the bucket it falls in); 0 when empty.
func histQuantile(lines []string, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, name+`_bucket{le="`)
		if !ok {
			continue
		}
		le, tail, _ := strings.Cut(rest, `"`)
		f := strings.Fields(tail)
		n, _ := strconv.ParseFloat(f[len(f)-1], 64)
		v := math.Inf(1)
		if le != "+Inf" {
			v, _ = strconv.ParseFloat(le, 64)
		}
		bs = append(bs, bucket{v, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0
	}
	want := q * bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= want {
			return b.le
		}
	}
	return math.Inf(1)
}
