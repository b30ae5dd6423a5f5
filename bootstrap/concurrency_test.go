package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// TestConcurrentRegistration: many workers of several engines register at
// once over HTTP, each twice (the client's retry), while probe sweeps run
// and two live engines race for one dp rank. No entry may be lost or
// doubled, and exactly one racer may win.
func TestConcurrentRegistration(t *testing.T) {
	const engines, tp, pp = 8, 4, 2
	p := newFakeProber()
	cfg := testConfig()
	s, _ := newTestServer(t, cfg, p)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	addr := func(dp, t, q int) string { return fmt.Sprintf("tcp://10.1.%d.%d:%d", dp, t, 5000+q) }
	racerAddr := func(who, t, q int) string { return fmt.Sprintf("tcp://10.2.%d.%d:%d", who, t, 5000+q) }
	for dp := range engines {
		for i := range tp {
			for q := range pp {
				p.set(addr(dp, i, q)[len("tcp://"):], true)
			}
		}
	}
	for who := range 2 {
		for i := range tp {
			for q := range pp {
				p.set(racerAddr(who, i, q)[len("tcp://"):], true)
			}
		}
	}

	ctx, stopSweeps := context.WithCancel(context.Background())
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for ctx.Err() == nil {
			s.sweep(ctx)
		}
	})

	var wg sync.WaitGroup
	var racerOK, racerRefused [2]atomic.Int32
	for dp := range engines {
		for i := range tp {
			for q := range pp {
				for range 2 {
					wg.Go(func() {
						code, body := httpDo(t, "POST", ts.URL+"/register", regBody(fmt.Sprintf("E%d", dp), dp, i, q, addr(dp, i, q)))
						if code != 200 {
							t.Errorf("dp %d tp %d pp %d: %d %s", dp, i, q, code, body)
						}
					})
				}
			}
		}
	}
	const raceDP = engines
	for who := range 2 {
		for i := range tp {
			for q := range pp {
				wg.Go(func() {
					code, _ := httpDo(t, "POST", ts.URL+"/register", regBody(fmt.Sprintf("R%d", who), raceDP, i, q, racerAddr(who, i, q)))
					switch code {
					case 200:
						racerOK[who].Add(1)
					case 400:
						racerRefused[who].Add(1)
					default:
						t.Errorf("racer %d: code %d", who, code)
					}
				})
			}
		}
	}
	testwait.Wait(t, &wg, "the concurrent registrations")
	stopSweeps()
	testwait.Wait(t, &sweeps, "the probe sweeps to stop")

	_, body := httpDo(t, "GET", ts.URL+"/query", "")
	var q map[string]struct {
		EngineID   string                       `json:"engine_id"`
		WorkerAddr map[string]map[string]string `json:"worker_addr"`
	}
	if err := json.Unmarshal([]byte(body), &q); err != nil {
		t.Fatal(err)
	}
	if len(q) != engines+1 {
		t.Fatalf("%d engines in /query, want %d", len(q), engines+1)
	}
	for dp := range engines {
		e := q[fmt.Sprint(dp)]
		if e.EngineID != fmt.Sprintf("E%d", dp) || len(e.WorkerAddr) != tp {
			t.Fatalf("dp %d: %+v", dp, e)
		}
		for i := range tp {
			for j := range pp {
				if got := e.WorkerAddr[fmt.Sprint(i)][fmt.Sprint(j)]; got != addr(dp, i, j) || len(e.WorkerAddr[fmt.Sprint(i)]) != pp {
					t.Fatalf("dp %d tp %d pp %d: %q", dp, i, j, got)
				}
			}
		}
	}
	// The first racer to register holds the rank; the other is refused on
	// every worker, since the winner stays alive.
	winner := q[fmt.Sprint(raceDP)].EngineID
	w := map[string]int{"R0": 0, "R1": 1}[winner]
	if winner != "R0" && winner != "R1" {
		t.Fatalf("race winner %q", winner)
	}
	if racerOK[w].Load() != tp*pp || racerRefused[w].Load() != 0 ||
		racerOK[1-w].Load() != 0 || racerRefused[1-w].Load() != tp*pp {
		t.Fatalf("race: ok %d/%d refused %d/%d (winner %s)",
			racerOK[0].Load(), racerOK[1].Load(), racerRefused[0].Load(), racerRefused[1].Load(), winner)
	}
	s.mu.Lock()
	counts, workers := s.reg.Counts(t0)
	s.mu.Unlock()
	if counts[StateReady] != engines+1 || workers[workerLive] != (engines+1)*tp*pp {
		t.Fatalf("counts %v %v", counts, workers)
	}
}
