package bench

import (
	"math"
	"testing"
	"time"
)

func TestHistQuantilesWithinPrecision(t *testing.T) {
	h := NewHist()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.9, 900 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{1, 1000 * time.Microsecond},
	}
	for _, tt := range tests {
		got := h.Quantile(tt.q)
		// 3 significant digits: within 0.1 % (HDR rounds to the bucket's top).
		if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 0.001 {
			t.Errorf("Quantile(%v) = %v, want %v ±0.1%%", tt.q, got, tt.want)
		}
	}
	if h.Count() != 1000 {
		t.Errorf("Count = %d, want 1000", h.Count())
	}
}

func TestHistClampsOutOfRange(t *testing.T) {
	h := NewHist()
	h.Record(-5 * time.Microsecond) // a clock step between processes
	h.Record(time.Hour)             // past the trackable range
	h.Record(time.Millisecond)
	if h.Count() != 3 {
		t.Fatalf("Count = %d, want 3: clamped samples must still count", h.Count())
	}
	if h.Clamped() != 2 {
		t.Errorf("Clamped = %d, want 2", h.Clamped())
	}
	if got := h.Quantile(1); got < 99*time.Second {
		t.Errorf("max = %v, want the upper bound (~100s)", got)
	}
}

func TestHistMergeAddsCounts(t *testing.T) {
	a, b := NewHist(), NewHist()
	for range 10 {
		a.Record(time.Millisecond)
		b.Record(3 * time.Millisecond)
	}
	b.Record(-1)
	a.Merge(b)
	if a.Count() != 21 || a.Clamped() != 1 {
		t.Errorf("after merge Count=%d Clamped=%d, want 21 and 1", a.Count(), a.Clamped())
	}
	if got := a.Quantile(0.25); got > 1001*time.Microsecond {
		t.Errorf("p25 = %v, want ~1ms", got)
	}
	if got := a.Quantile(0.75); got < 2990*time.Microsecond {
		t.Errorf("p75 = %v, want ~3ms", got)
	}
}

func TestSummarizeEmptyAndCDF(t *testing.T) {
	if s := NewHist().Summarize(); s.Count != 0 || s.CDF != nil {
		t.Errorf("empty Summarize = %+v, want zero", s)
	}
	h := NewHist()
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	s := h.Summarize()
	if len(s.CDF) != len(cdfQuantiles) {
		t.Fatalf("CDF has %d points, want %d", len(s.CDF), len(cdfQuantiles))
	}
	for i := 1; i < len(s.CDF); i++ {
		if s.CDF[i].ValueUS < s.CDF[i-1].ValueUS {
			t.Errorf("CDF not monotonic at %d: %v < %v", i, s.CDF[i].ValueUS, s.CDF[i-1].ValueUS)
		}
	}
	if math.Abs(s.MinUS-1000) > 1 || math.Abs(s.MaxUS-100000) > 100 {
		t.Errorf("min/max = %v/%v µs, want 1000/100000", s.MinUS, s.MaxUS)
	}
	if math.Abs(s.MeanUS-50500) > 100 {
		t.Errorf("mean = %v µs, want ~50500", s.MeanUS)
	}
}
