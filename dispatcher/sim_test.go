package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// simEngine is an in-process engine: it takes ADDs and ABORTs from simSender and
// steps every live request by one token per step, feeding outputs back through
// HandleOutputs from its own goroutine, as the frontend's receive loop would.
type simEngine struct {
	rank int
	d    *Dispatcher
	in   chan simMsg
	kill chan struct{}
	done chan struct{}
	// step, when set, paces the engine like a real forward pass; stamp writes the
	// time of the HandleOutputs call into each output's NumNaNsInLogits so a reader
	// can measure delivery latency (benchmarks only).
	step  time.Duration
	stamp bool
	// lockstep, when set, makes the engine take one step per signal and report on
	// stepped, so every engine runs at the same speed whatever the scheduler does.
	lockstep chan struct{}
	stepped  chan<- struct{}
}

type simMsg struct {
	id        string
	maxTokens int64
	start     int64 // tokens already generated: a migrated request's prompt carries them
	abort     []string
}

type simReq struct {
	id        string
	next, max int64
}

func (e *simEngine) run() {
	defer close(e.done)
	live := map[string]*simReq{}
	outs := &wire.EngineCoreOutputs{EngineIndex: int64(e.rank)}
	stats := &wire.SchedulerStats{}
	var tick <-chan time.Time
	if e.step > 0 {
		t := time.NewTicker(e.step)
		defer t.Stop()
		tick = t.C
	}
	apply := func(m simMsg) {
		for _, id := range m.abort {
			delete(live, id)
		}
		if m.id != "" {
			live[m.id] = &simReq{id: m.id, next: m.start, max: m.start + m.maxTokens}
		}
	}
	for {
		if e.lockstep != nil {
			select {
			case <-e.lockstep:
			case <-e.kill:
				return
			}
		} else if len(live) == 0 {
			select {
			case m := <-e.in:
				apply(m)
			case <-e.kill:
				return
			}
		}
		if tick != nil {
			select {
			case <-tick:
			case <-e.kill:
				return
			}
		}
	drain:
		for {
			select {
			case m := <-e.in:
				apply(m)
			case <-e.kill:
				return
			default:
				break drain
			}
		}
		outs.Outputs = outs.Outputs[:0]
		for id, r := range live {
			o := wire.EngineCoreOutput{RequestID: id, NewTokenIDs: []int64{r.next}, FinishReason: wire.FinishNone}
			r.next++
			if r.next == r.max {
				o.FinishReason = wire.FinishLength
				delete(live, id)
			}
			outs.Outputs = append(outs.Outputs, o)
		}
		stats.NumRunningReqs = int64(len(live))
		outs.SchedulerStats = stats
		if e.stamp {
			now := time.Now().UnixNano()
			for i := range outs.Outputs {
				outs.Outputs[i].NumNaNsInLogits = now
			}
		}
		if len(outs.Outputs) > 0 || e.lockstep == nil {
			e.d.HandleOutputs(e.rank, outs)
		}
		if e.lockstep != nil {
			select {
			case e.stepped <- struct{}{}:
			case <-e.kill:
				return
			}
		}
	}
}

// simSender hands frames to simEngines; a full queue is a stuck engine.
type simSender struct {
	engines []*simEngine
	sentAt  *sync.Map // request id -> time.Time of Send entry, when set
}

func (s *simSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	entered := time.Now()
	defer wire.PutBuffer(body)
	e := s.engines[rank]
	var m simMsg
	switch typ {
	case wire.RequestAdd:
		var req wire.EngineCoreRequest
		if err := wire.DecodeAdd(append([][]byte{body}, aux...), &req); err != nil {
			return err
		}
		// Token k of a request is k: one whose prompt (mkReq's three tokens) carries
		// k delivered tokens continues from k, as a migrated request must.
		m = simMsg{id: req.RequestID, maxTokens: req.Sampling.MaxTokens.Value, start: int64(len(req.PromptTokenIDs) - 3)}
		if s.sentAt != nil {
			s.sentAt.Store(req.RequestID, entered)
		}
	case wire.RequestAbort:
		ids, err := wire.DecodeAbort(body)
		if err != nil {
			return err
		}
		m = simMsg{abort: ids}
	default:
		return nil
	}
	select {
	case <-e.done:
		return fmt.Errorf("engine rank %d dead", rank)
	case e.in <- m:
		return nil
	default:
		return fmt.Errorf("engine rank %d stuck", rank)
	}
}

type sim struct {
	d       *Dispatcher
	sender  *simSender
	engines []*simEngine
}

// lockstep drives every engine one step at a time until stop closes.
func lockstep(engines []*simEngine, stepped <-chan struct{}, stop <-chan struct{}) {
	for {
		for _, e := range engines {
			select {
			case e.lockstep <- struct{}{}:
			case <-stop:
				return
			}
		}
		for range engines {
			select {
			case <-stepped:
			case <-stop:
				return
			}
		}
	}
}

func newSim(t testing.TB, cfg Config, n int, tune ...func(*simEngine)) *sim {
	t.Helper()
	s := &sim{sender: &simSender{}}
	d, err := New(cfg, s.sender)
	if err != nil {
		t.Fatal(err)
	}
	s.d = d
	for r := range n {
		e := &simEngine{rank: r, d: d, in: make(chan simMsg, 1<<14), kill: make(chan struct{}), done: make(chan struct{})}
		for _, f := range tune {
			f(e)
		}
		s.engines = append(s.engines, e)
		s.sender.engines = append(s.sender.engines, e)
	}
	stepped, stopDriver := make(chan struct{}), make(chan struct{})
	var driver sync.WaitGroup
	t.Cleanup(func() {
		close(stopDriver)
		testwait.Wait(t, &driver, "the lockstep driver to stop")
		_ = d.Close()
		for _, e := range s.engines {
			select {
			case <-e.done:
			default:
				close(e.kill)
				testwait.Closed(t, e.done, fmt.Sprintf("rank %d's engine to stop", e.rank))
			}
		}
	})
	for _, e := range s.engines {
		d.EngineUp(e.rank)
		go e.run()
	}
	if s.engines[0].lockstep != nil {
		for _, e := range s.engines {
			e.stepped = stepped
		}
		driver.Go(func() { lockstep(s.engines, stepped, stopDriver) })
	}
	return s
}

// killEngine stops rank's engine and reports it down, as the frontend would.
func (s *sim) killEngine(rank int) {
	e := s.engines[rank]
	close(e.kill)
	<-e.done
	s.d.EngineDown(rank, errors.New("ENGINE_CORE_DEAD"))
}

type simResult struct {
	rank   int
	tokens int64
	err    error
}

// runLoad pushes n requests through workers concurrent streams; request i asks for
// 1+i%17 tokens. midway, when set, runs once after n/8 completions.
func runLoad(t testing.TB, s *sim, n, workers int, midway func()) []simResult {
	t.Helper()
	results := make([]simResult, n)
	var next, completed atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds every worker, so wg.Wait
	defer cancel()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				req := mkReq(fmt.Sprint("req-", i))
				req.Sampling.MaxTokens = wire.SomeInt(int64(1 + i%17))
				st, err := s.d.Submit(ctx, req)
				if err != nil {
					results[i] = simResult{rank: -1, err: err}
					continue
				}
				res := simResult{rank: st.Rank()}
				for {
					o, err := st.Recv(ctx)
					if err != nil {
						if !errors.Is(err, io.EOF) {
							res.err = err
						}
						break
					}
					for _, tok := range o.TokenIDs {
						if tok != res.tokens {
							res.err = fmt.Errorf("token %d out of order (want %d)", tok, res.tokens)
						}
						res.tokens++
					}
				}
				results[i] = res
				if midway != nil && completed.Add(1) >= int64(n/8) {
					once.Do(midway)
				}
			}
		})
	}
	wg.Wait()
	return results
}

// InFlightAfterEnd is d's in-flight count once every request has ended, waiting up
// to testwait.Deadline for it to reach 0: a request's final output can reach its
// Stream, and Recv return it, just before the output loop's bookkeeping of the
// request's end (settle) decrements the count. The e2e tests use it too.
func InFlightAfterEnd(d *Dispatcher) int {
	for end := time.Now().Add(testwait.Deadline); d.InFlight() != 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	return d.InFlight()
}

func TestSim10kRequestsOver4Engines(t *testing.T) {
	// Lockstep gives the engines equal speed, so an even spread is the policy's
	// doing and not the goroutine scheduler's.
	s := newSim(t, Config{}, 4, func(e *simEngine) { e.lockstep = make(chan struct{}) })
	const n = 10000
	results := runLoad(t, s, n, 256, nil)
	perRank := make([]int, 4)
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		if want := int64(1 + i%17); r.tokens != want {
			t.Fatalf("request %d got %d tokens, want %d", i, r.tokens, want)
		}
		perRank[r.rank]++
	}
	for r, c := range perRank {
		if c < n/4*95/100 || c > n/4*105/100 {
			t.Errorf("rank %d took %d of %d requests (%v): not balanced", r, c, n, perRank)
		}
	}
	if n := InFlightAfterEnd(s.d); n != 0 {
		t.Errorf("%d still in flight", n)
	}
	t.Logf("spread %v", perRank)
}

// Rank 2 dies mid-run: its requests move to the other ranks and continue in order
// (the sim engines continue a migrated request's sequence), so none fails.
func TestSimEngineKilledMidRun(t *testing.T) {
	s := newSim(t, Config{}, 4)
	const n = 4000
	results := runLoad(t, s, n, 256, func() { s.killEngine(2) })
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("request %d (submitted to rank %d) failed with %v; rank 2's should have moved", i, r.rank, r.err)
		}
		if want := int64(1 + i%17); r.tokens != want {
			t.Fatalf("request %d got %d tokens, want %d", i, r.tokens, want)
		}
	}
	if st := s.d.Engines(); st[2].State != EngineStateDown || st[2].InFlight != 0 {
		t.Errorf("rank 2 status %+v", st[2])
	}
	if n := InFlightAfterEnd(s.d); n != 0 {
		t.Errorf("%d still in flight", n)
	}
}

// With migration off, rank 2's requests fail naming it, and only those.
func TestSimEngineKilledMidRunNoMigration(t *testing.T) {
	s := newSim(t, Config{MaxMigrations: -1}, 4)
	const n = 4000
	results := runLoad(t, s, n, 256, func() { s.killEngine(2) })
	failed := 0
	for i, r := range results {
		if r.err == nil {
			if want := int64(1 + i%17); r.tokens != want {
				t.Fatalf("request %d got %d tokens, want %d", i, r.tokens, want)
			}
			continue
		}
		failed++
		var down *EngineDownError
		if !errors.As(r.err, &down) || down.Rank != 2 || r.rank != 2 && r.rank != -1 {
			t.Fatalf("request %d on rank %d failed with %v; only rank 2's may fail", i, r.rank, r.err)
		}
	}
	t.Logf("%d of %d failed, all on rank 2", failed, n)
}
