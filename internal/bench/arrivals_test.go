package bench

import (
	"math"
	"testing"
	"time"
)

func TestArrivalsMeanRate(t *testing.T) {
	for _, rate := range []float64{10, 5000, 1e6} {
		a := NewArrivals(rate, 42)
		const n = 200000
		var last time.Duration
		for range n {
			at := a.Next()
			if at < last {
				t.Fatalf("rate %v: arrivals went back in time: %v after %v", rate, at, last)
			}
			last = at
		}
		got := n / last.Seconds()
		// The mean of 200k exponential gaps is within 1 % of 1/rate (4.5 sigma).
		if math.Abs(got-rate)/rate > 0.01 {
			t.Errorf("rate %v: achieved %v", rate, got)
		}
	}
}

func TestArrivalsAreExponential(t *testing.T) {
	// For exponential gaps the fraction longer than the mean is 1/e, and the
	// coefficient of variation is 1; a metronome would give 0 for both spreads.
	a := NewArrivals(1000, 7)
	const n = 100000
	var prev time.Duration
	gaps := make([]float64, n)
	for i := range gaps {
		at := a.Next()
		gaps[i] = (at - prev).Seconds()
		prev = at
	}
	mean := prev.Seconds() / n
	var over, ss float64
	for _, g := range gaps {
		if g > mean {
			over++
		}
		ss += (g - mean) * (g - mean)
	}
	if frac := over / n; math.Abs(frac-1/math.E) > 0.01 {
		t.Errorf("fraction of gaps above the mean = %v, want 1/e = %v", frac, 1/math.E)
	}
	if cv := math.Sqrt(ss/n) / mean; math.Abs(cv-1) > 0.02 {
		t.Errorf("coefficient of variation = %v, want 1", cv)
	}
}

func TestArrivalsSeedReplays(t *testing.T) {
	a, b, c := NewArrivals(100, 1), NewArrivals(100, 1), NewArrivals(100, 2)
	same := true
	for range 100 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if x != y {
			t.Fatalf("same seed diverged: %v vs %v", x, y)
		}
		same = same && x == z
	}
	if same {
		t.Error("different seeds gave the same schedule")
	}
}
