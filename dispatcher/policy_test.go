package dispatcher

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-llm/switchyard/wire"
)

func ready(ranks ...int) []Load {
	ls := make([]Load, len(ranks))
	for i, r := range ranks {
		ls[i] = Load{Rank: r, Ready: true}
	}
	return ls
}

func TestScore(t *testing.T) {
	tests := []struct {
		name string
		l    Load
		want float64
	}{
		{"in-flight before stats", Load{InFlight: 3}, 3},
		{"stats preferred over a lower in-flight", Load{InFlight: 1, Waiting: 2, Running: 5}, 7},
		{"in-flight is a lower bound under stale stats", Load{InFlight: 9, Waiting: 1, Running: 1}, 9},
		{"admissions since stats count as waiting", Load{InFlight: 2, Waiting: 1, Running: 2, Admitted: 3}, 6},
		{"no kv term without a queue", Load{Running: 4, KVCacheUsage: 0.9}, 4},
		{"no kv term below the knee", Load{Waiting: 4, KVCacheUsage: 0.5}, 4},
		{"kv pressure on the queue", Load{Waiting: 4, KVCacheUsage: 0.75}, 4 + 4*6*0.25},
		{"endings since stats are no longer running", Load{InFlight: 1, Running: 5, Ended: 4}, 1},
		{"endings never go below in-flight", Load{InFlight: 2, Running: 1, Ended: 9}, 2},
		{"stale stats: in-flight only", Load{InFlight: 1, Waiting: 3, Running: 7, Stale: true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.Score(); got != tt.want {
				t.Errorf("Score(%+v) = %v, want %v", tt.l, got, tt.want)
			}
		})
	}
}

func TestLeastLoadedChoose(t *testing.T) {
	tests := []struct {
		name  string
		loads []Load
		seq   uint64
		want  int
	}{
		{"in-flight counted before stats", []Load{
			{Rank: 0, Ready: true, InFlight: 2}, {Rank: 1, Ready: true, InFlight: 0}, {Rank: 2, Ready: true, InFlight: 1}}, 0, 1},
		{"real stats preferred", []Load{
			{Rank: 0, Ready: true, InFlight: 1, Waiting: 0, Running: 8}, {Rank: 1, Ready: true, InFlight: 2}}, 0, 1},
		{"explicit admissions raise the score", []Load{
			{Rank: 0, Ready: true, Running: 2}, {Rank: 1, Ready: true, Running: 2, Admitted: 3}, {Rank: 2, Ready: true, Running: 2}}, 1, 2},
		{"kv pressure steers away", []Load{
			{Rank: 0, Ready: true, Waiting: 4, KVCacheUsage: 0.95}, {Rank: 1, Ready: true, Waiting: 4, KVCacheUsage: 0.2}}, 0, 1},
		{"dead engine skipped even when idle", []Load{
			{Rank: 0, Ready: false}, {Rank: 1, Ready: true, InFlight: 50}}, 0, 1},
		{"nothing ready", []Load{{Rank: 0}, {Rank: 1}}, 0, -1},
		{"no engines", nil, 0, -1},
		{"tie goes to the scan start", ready(0, 1, 2, 3), 2, 2},
		{"tie scan wraps", ready(0, 1, 2, 3), 7, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LeastLoaded.Choose(tt.loads, tt.seq, 0); got != tt.want {
				t.Errorf("Choose = %d, want %d", got, tt.want)
			}
		})
	}
}

// simulate admits n requests the way the Dispatcher does (in-flight and admitted
// bumped on the chosen engine) and returns how many each engine got.
func simulate(p Policy, loads []Load, n int, seq uint64) []int {
	got := make([]int, len(loads))
	for i := range n {
		s := seq + uint64(i)
		j := p.Choose(loads, s, splitmix64(s))
		if j < 0 {
			continue
		}
		got[j]++
		loads[j].InFlight++
		loads[j].Admitted++
	}
	return got
}

func TestBurstsSpread(t *testing.T) {
	t.Run("before any stats", func(t *testing.T) {
		if diff := cmp.Diff([]int{25, 25, 25, 25}, simulate(LeastLoaded, ready(0, 1, 2, 3), 100, 0)); diff != "" {
			t.Errorf("spread (-want +got):\n%s", diff)
		}
	})
	t.Run("equal stats, burst before the next refresh", func(t *testing.T) {
		loads := ready(0, 1, 2)
		for i := range loads {
			loads[i].Waiting, loads[i].Running = 3, 10
		}
		if diff := cmp.Diff([]int{2, 2, 2}, simulate(LeastLoaded, loads, 6, 5)); diff != "" {
			t.Errorf("spread (-want +got):\n%s", diff)
		}
	})
	t.Run("burst fills the lighter engine first, then alternates", func(t *testing.T) {
		// [[8,6],[7,7]]-style: engine 1 reported 2 fewer; a burst of 4 levels them first.
		loads := []Load{{Rank: 0, Ready: true, Waiting: 2, Running: 6}, {Rank: 1, Ready: true, Running: 6}}
		if diff := cmp.Diff([]int{1, 3}, simulate(LeastLoaded, loads, 4, 0)); diff != "" {
			t.Errorf("spread (-want +got):\n%s", diff)
		}
	})
	t.Run("power of two stays within a few of even", func(t *testing.T) {
		got := simulate(PowerOfTwo, ready(0, 1, 2, 3, 4, 5, 6, 7), 8000, 1)
		for r, n := range got {
			if n < 950 || n > 1050 {
				t.Errorf("rank %d got %d of 8000, want ~1000 (%v)", r, n, got)
			}
		}
	})
	t.Run("round robin is exact", func(t *testing.T) {
		if diff := cmp.Diff([]int{3, 3, 3}, simulate(RoundRobin, ready(0, 1, 2), 9, 0)); diff != "" {
			t.Errorf("spread (-want +got):\n%s", diff)
		}
	})
}

func TestTiesStable(t *testing.T) {
	// The same snapshot and sequence number always give the same answer, and a run of
	// ties visits the engines in rank order from the rotating start.
	loads := ready(0, 1, 2)
	var got []int
	for seq := range uint64(6) {
		a := LeastLoaded.Choose(loads, seq, 0)
		if b := LeastLoaded.Choose(loads, seq, 99); a != b {
			t.Fatalf("seq %d: %d then %d for the same snapshot", seq, a, b)
		}
		got = append(got, a)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 0, 1, 2}, got); diff != "" {
		t.Errorf("tie order (-want +got):\n%s", diff)
	}
}

func TestDeadEnginesNeverChosen(t *testing.T) {
	loads := ready(0, 1, 2, 3)
	loads[1].Ready, loads[3].Ready = false, false
	loads[0].InFlight, loads[2].InFlight = 100, 100
	for _, p := range []Policy{LeastLoaded, PowerOfTwo, RoundRobin} {
		for seq := range uint64(200) {
			j := p.Choose(loads, seq, splitmix64(seq))
			if j != 0 && j != 2 {
				t.Fatalf("%v chose index %d (not ready)", p, j)
			}
		}
		if j := p.Choose([]Load{{Rank: 0}, {Rank: 1}}, 0, 0); j != -1 {
			t.Errorf("%v with nothing ready chose %d", p, j)
		}
	}
}

func TestPowerOfTwoPicksTheLighterOfTwo(t *testing.T) {
	loads := []Load{{Rank: 0, Ready: true, InFlight: 9}, {Rank: 1, Ready: true, InFlight: 1}}
	for seq := range uint64(100) {
		if j := PowerOfTwo.Choose(loads, seq, splitmix64(seq)); j != 1 {
			t.Fatalf("rnd %d: chose %d, want the lighter engine 1", seq, j)
		}
	}
}

func TestPinRank(t *testing.T) {
	loads := ready(0, 1, 3)
	loads[2].Ready = false
	if i, err := pinRank(loads, 1); err != nil || i != 1 {
		t.Errorf("pinRank(1) = %d, %v; want 1, nil", i, err)
	}
	for _, tt := range []struct {
		rank int64
		want string
	}{
		{2, "data parallel rank 2 is not connected to this frontend; connected ranks: [0, 1]"},
		{3, "data parallel rank 3 is not connected to this frontend; connected ranks: [0, 1]"},
		{70000, "data parallel rank 70000 is not connected to this frontend; connected ranks: [0, 1]"},
	} {
		_, err := pinRank(loads, tt.rank)
		var inv *InvalidDataParallelRank
		if !errors.As(err, &inv) {
			t.Fatalf("pinRank(%d) = %v, want *InvalidDataParallelRank", tt.rank, err)
		}
		if err.Error() != tt.want {
			t.Errorf("message %q, want %q", err.Error(), tt.want)
		}
		if diff := cmp.Diff([]int{0, 1}, inv.ConnectedRanks); diff != "" {
			t.Errorf("ConnectedRanks (-want +got):\n%s", diff)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, name := range []string{"", PolicyLeastLoaded, PolicyPowerOfTwo, PolicyRoundRobin} {
		if _, err := parsePolicy(name); err != nil {
			t.Errorf("parsePolicy(%q): %v", name, err)
		}
	}
	if err := (Config{Policy: "random"}).Validate(); err == nil {
		t.Error("Validate accepted an unknown policy")
	}
	if err := (Config{StreamBuffer: -1}).Validate(); err == nil {
		t.Error("Validate accepted a negative StreamBuffer")
	}
}

// An engine whose requests were all aborted goes idle and sends no more stats. Its
// last report must not keep it loaded forever: in the bench, after a client's
// requests were aborted, ranks whose last stats predated the ABORTs finished nothing
// for the rest of the run. Endings since the stats count at once; stats taken before
// the ABORTs reached the engine (and delivered after them) stop counting once stale.
func TestIdleEngineNotStarvedByItsLastStats(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("stats after the aborts %v", late), func(t *testing.T) {
			var now atomic.Int64
			now.Store(time.Unix(1000, 0).UnixNano())
			clock := func() time.Time { return time.Unix(0, now.Load()) }
			h := newHarness(t, Config{Now: clock}, 0, 1)
			ranks := map[int][]string{}
			for i := range 8 {
				id := fmt.Sprint("r", i)
				rank, err := h.d.SubmitFunc(mkReq(id), func(int, *wire.EngineCoreOutput, error) {})
				if err != nil {
					t.Fatal(err)
				}
				ranks[rank] = append(ranks[rank], id)
			}
			if len(ranks[0]) == 0 || len(ranks[1]) < 2 {
				t.Fatalf("requests spread %v", ranks)
			}
			stats := func(rank int, running int) {
				o := batch(rank)
				o.SchedulerStats = &wire.SchedulerStats{NumRunningReqs: int64(running)}
				h.d.HandleOutputs(rank, o)
			}
			stats(0, len(ranks[0]))
			stats(1, len(ranks[1]))
			h.d.Abort(ranks[0]...) // rank 0 is now idle and will report nothing more
			h.d.Abort(ranks[1][0])
			stats(1, len(ranks[1])-1)
			if late {
				stats(0, len(ranks[0])) // taken before the ABORT reached the engine
				now.Add(int64(DefaultConfig().StatsMaxAge) + 1)
				stats(1, len(ranks[1])-1) // rank 1 is busy: its stats stay fresh
			}
			rank, err := h.d.SubmitFunc(mkReq("next"), func(int, *wire.EngineCoreOutput, error) {})
			if err != nil {
				t.Fatal(err)
			}
			if rank != 0 {
				t.Errorf("new request went to rank %d; rank 0 holds none of ours (engines %+v)", rank, h.d.Engines())
			}
		})
	}
}
