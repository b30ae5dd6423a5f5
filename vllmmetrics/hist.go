package vllmmetrics

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// histVec is a histogram family labelled model_name and engine, observed on the
// output path. A prometheus Histogram spends four contended atomic operations and
// its hot/cold bookkeeping on every observation; a request makes a dozen of these
// (one per output, ten at its end), on the goroutine that also writes the client's
// outputs, where each microsecond shows in the latency (issue 13). Here an
// observation is a bucket search and two atomics, and a scrape builds const
// histograms. A scrape taken during an observation may see its bucket without its
// sum, which the next scrape corrects: the counts are exact.
type histVec struct {
	upper []float64
	descs []*prometheus.Desc // the family, then names it is also exported under

	mu     sync.Mutex
	series map[[2]string]*hist // by model_name, engine
	order  []labelled          // the same, in creation order, for a stable scrape
}

// labelled is one series with its label values.
type labelled struct {
	labels [2]string
	h      *hist
}

// hist is one series of a histVec.
type hist struct {
	upper  []float64
	counts []atomic.Uint64 // per bucket; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistVec(name, help string, upper []float64) *histVec {
	return &histVec{
		upper:  upper,
		descs:  []*prometheus.Desc{prometheus.NewDesc(name, help, []string{"model_name", "engine"}, nil)},
		series: map[[2]string]*hist{},
	}
}

// alsoAs exports the same series under another name too.
func (v *histVec) alsoAs(name, help string) *histVec {
	v.descs = append(v.descs, prometheus.NewDesc(name, help, []string{"model_name", "engine"}, nil))
	return v
}

// with returns the series of model and engine, made on first use.
func (v *histVec) with(model, engine string) *hist {
	k := [2]string{model, engine}
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.series[k]
	if h == nil {
		h = &hist{upper: v.upper, counts: make([]atomic.Uint64, len(v.upper)+1)}
		v.series[k] = h
		v.order = append(v.order, labelled{k, h})
	}
	return h
}

// Observe counts v in the first bucket whose upper bound is at least v (buckets
// are "le"); NaN and values above the last bound go to +Inf, as prometheus does.
func (h *hist) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.upper, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// snapshot is the series' count, sum and cumulative bucket counts.
func (h *hist) snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.upper))
	for i, le := range h.upper {
		count += h.counts[i].Load()
		buckets[le] = count
	}
	count += h.counts[len(h.upper)].Load()
	return count, math.Float64frombits(h.sum.Load()), buckets
}

func (v *histVec) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range v.descs {
		ch <- d
	}
}

func (v *histVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	all := append([]labelled(nil), v.order...)
	v.mu.Unlock()
	for _, s := range all {
		count, sum, buckets := s.h.snapshot()
		for _, d := range v.descs {
			ch <- prometheus.MustNewConstHistogram(d, count, sum, buckets, s.labels[0], s.labels[1])
		}
	}
}
