package fasthist

import (
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Observations land in the first bucket whose bound is at least the value, NaN and
// values past the last bound in +Inf; a batch adds the same as its observations.
func TestBucketsAndBatch(t *testing.T) {
	upper := []float64{0.001, 0.01, 0.1}
	direct, batched := New(upper), New(upper)
	vals := []float64{0.0005, 0.001, 0.002, 0.01, 0.5, math.NaN(), 0.05}
	var b Batch
	for _, v := range vals {
		if !math.IsNaN(v) {
			direct.Observe(v)
			b.Observe(batched, v)
		}
	}
	batched.Flush(&b)
	batched.Flush(&b) // empty: adds nothing
	for _, h := range []*Hist{direct, batched} {
		count, sum, buckets := h.Snapshot()
		if count != 6 || math.Abs(sum-0.5635) > 1e-12 {
			t.Errorf("count %d sum %v, want 6 and 0.5635", count, sum)
		}
		want := map[float64]uint64{0.001: 2, 0.01: 4, 0.1: 5}
		for le, n := range want {
			if buckets[le] != n {
				t.Errorf("le %v: %d, want %d", le, buckets[le], n)
			}
		}
	}
	nan := New(upper)
	nan.Observe(math.NaN())
	if c, _, bk := nan.Snapshot(); c != 1 || bk[0.1] != 0 {
		t.Errorf("NaN: count %d, le 0.1 %d; want it in +Inf", c, bk[0.1])
	}
}

// Concurrent observers lose nothing, and the metric carries the labels.
func TestConcurrentAndMetric(t *testing.T) {
	h := New([]float64{1, 2})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				h.Observe(1.5)
			}
		})
	}
	wg.Wait()
	var m dto.Metric
	desc := prometheus.NewDesc("x_seconds", "x", []string{"rank"}, nil)
	if err := h.Metric(desc, "0").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetHistogram().GetSampleCount(); got != 8000 {
		t.Errorf("count %d, want 8000", got)
	}
	if got := m.GetHistogram().GetSampleSum(); got != 12000 {
		t.Errorf("sum %v, want 12000", got)
	}
	if m.GetLabel()[0].GetValue() != "0" {
		t.Errorf("labels %v", m.GetLabel())
	}
}

func BenchmarkBatchObserve(b *testing.B) {
	h := New([]float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1})
	var bt Batch
	for i := range b.N {
		bt.Observe(h, float64(i%100)/1000)
		if i%64 == 63 {
			h.Flush(&bt)
		}
	}
}

// bucket is sort.SearchFloat64s written out: the same index for bounds, values
// between and beyond them, NaN and the infinities, over bound lists of every length.
func TestBucketIsSearchFloat64s(t *testing.T) {
	all := []float64{5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	vals := []float64{math.NaN(), math.Inf(-1), math.Inf(1), -1, 0, 1e-9, 7, 1e9}
	for _, u := range all {
		vals = append(vals, u, math.Nextafter(u, 0), math.Nextafter(u, 10))
	}
	for n := range len(all) + 1 {
		h := New(all[:n])
		for _, v := range vals {
			if got, want := h.bucket(v), sort.SearchFloat64s(all[:n], v); got != want {
				t.Errorf("%d bounds, v %v: bucket %d, sort.SearchFloat64s %d", n, v, got, want)
			}
		}
	}
}

// A Series registers and gathers as the prometheus Histogram it replaces: one
// unlabelled histogram family with its name, help and buckets.
func TestSeriesGathers(t *testing.T) {
	s := NewSeries("x_latency_seconds", "Time x took.", []float64{0.001, 0.01})
	reg := prometheus.NewRegistry()
	if err := reg.Register(s); err != nil {
		t.Fatal(err)
	}
	s.Observe(0.005)
	s.Observe(2)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != "x_latency_seconds" || fams[0].GetHelp() != "Time x took." || fams[0].GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("families %v", fams)
	}
	h := fams[0].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 2.005 || len(h.GetBucket()) != 2 || h.GetBucket()[1].GetCumulativeCount() != 1 {
		t.Fatalf("histogram %v", h)
	}
	if len(fams[0].GetMetric()[0].GetLabel()) != 0 {
		t.Fatalf("labels %v", fams[0].GetMetric()[0].GetLabel())
	}
}
