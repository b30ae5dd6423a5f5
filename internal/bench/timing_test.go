package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJoin(t *testing.T) {
	const from = 1_000
	us := func(n int64) int64 { return n * 1000 }
	clients := []ClientRecord{
		0: {Submit: 500, FirstRecv: 900, LastRecv: 950, Tokens: 4},            // warm-up: not measured
		1: {Submit: us(10), FirstRecv: us(130), LastRecv: us(200), Tokens: 4}, // rank 0
		2: {Submit: us(20), FirstRecv: us(150), LastRecv: us(250), Tokens: 4}, // rank 1
		3: {Submit: us(30), Failed: true},                                     // failed
		4: {Submit: us(40), FirstRecv: us(90)},                                // in flight at the end
		5: {Submit: us(50), FirstRecv: us(60), LastRecv: us(70), Tokens: 1},   // no engine record
	}
	engines := []EngineRecord{
		{Seq: 0, Rank: 0, Add: 600, FirstSend: 800, LastSend: 900},
		{Seq: 1, Rank: 0, Add: us(15), FirstSend: us(120), LastSend: us(190)},
		{Seq: 2, Rank: 1, Add: us(40), FirstSend: us(110), LastSend: us(240)},
		{Seq: 99, Rank: 1, Add: 1, FirstSend: 2, LastSend: 3}, // not ours
	}
	tm := Join(clients, engines, from, 2)
	type got struct {
		Measured, Failed, Unmatched, Tokens int64
		PerRank                             []int64
		Dispatch, Return, Overhead, TTFT    []time.Duration
	}
	q := func(h *Hist) []time.Duration { return []time.Duration{h.Quantile(0), h.Quantile(1)} }
	g := got{tm.Measured, tm.Failed, tm.Unmatched, tm.Tokens, tm.PerRank,
		q(tm.Dispatch), q(tm.Return), q(tm.Overhead), q(tm.TTFT)}
	// Dispatch: 5 and 20 µs; return: 10 and 40 µs; overhead 15 and 60 µs;
	// TTFT 120, 130 and 10 µs (request 5 counts client-side even without a match).
	want := got{Measured: 3, Failed: 1, Unmatched: 1, Tokens: 9, PerRank: []int64{1, 1},
		Dispatch: []time.Duration{5 * time.Microsecond, 20 * time.Microsecond},
		Return:   []time.Duration{10 * time.Microsecond, 40 * time.Microsecond},
		Overhead: []time.Duration{15 * time.Microsecond, 60 * time.Microsecond},
		TTFT:     []time.Duration{10 * time.Microsecond, 130 * time.Microsecond},
	}
	// HDR values are exact to 3 digits at these magnitudes.
	approx := cmp.Comparer(func(a, b time.Duration) bool {
		d := a - b
		return d < 50 && d > -50
	})
	if diff := cmp.Diff(want, g, approx); diff != "" {
		t.Errorf("Join (-want +got):\n%s", diff)
	}
}

func TestSeqOf(t *testing.T) {
	tests := []struct {
		id   string
		want int64
	}{
		{"bench-0", 0}, {"bench-123456", 123456}, {"bench-", -1}, {"bench-x", -1},
		{"cmpl-1", -1}, {"", -1},
	}
	for _, tt := range tests {
		if got := seqOf(tt.id); got != tt.want {
			t.Errorf("seqOf(%q) = %d, want %d", tt.id, got, tt.want)
		}
	}
}
