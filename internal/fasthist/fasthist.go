// Package fasthist is a Prometheus histogram for the output path. A prometheus
// Histogram spends several contended atomic operations and its hot/cold
// bookkeeping on every observation, on the goroutine that also writes the
// clients' outputs, where each microsecond shows in the latency. Here an
// observation is a bucket search and two atomics, or, through a Batch kept on the
// caller's stack for one output batch, a bucket search and a local increment with
// the atomics paid once per batch. A scrape builds const histograms
// (Hist.Metric); a Series is one unlabelled Hist as a prometheus.Collector. A
// scrape taken during an observation may see its bucket without its sum, which the
// next scrape corrects: the counts are exact.
//
//	h := fasthist.New([]float64{0.001, 0.01, 0.1, 1})
//	h.Observe(0.004)
//
//	var b fasthist.Batch // per output batch, on the stack
//	b.Observe(h, 0.02)
//	h.Flush(&b)
//
//	ch <- h.Metric(desc, "rank-0")
package fasthist

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// batchBuckets is how many buckets a Batch counts locally (it is a fixed array);
// a Hist with more counts the rest straight into its atomics.
const batchBuckets = 32

// Hist is one histogram series: fixed upper bounds ("le"), a count per bucket and
// the sum. It is safe for concurrent use.
type Hist struct {
	upper  []float64
	counts []atomic.Uint64 // per bucket; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

// New returns a histogram with the given increasing upper bounds (+Inf is implied).
func New(upper []float64) *Hist {
	return &Hist{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// bucket is the first bucket whose upper bound is at least v; NaN and values above
// the last bound go to +Inf, as prometheus does. It is sort.SearchFloat64s written
// out: the library's goes through sort.Search's closure, an indirect call per step,
// about a third of an observation's cost on the output path.
func (h *Hist) bucket(v float64) int {
	lo, hi := 0, len(h.upper)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.upper[m] >= v { // false for NaN: it ends past the last bound
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// Observe counts v.
func (h *Hist) Observe(v float64) {
	h.counts[h.bucket(v)].Add(1)
	h.addSum(v)
}

func (h *Hist) addSum(v float64) {
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Batch collects observations for one Hist during one output batch; Flush adds
// them. The zero value is empty.
type Batch struct {
	counts [batchBuckets]uint32
	n      uint32
	sum    float64
}

// Observe counts v into b, in h's buckets.
func (b *Batch) Observe(h *Hist, v float64) {
	i := h.bucket(v)
	if i >= batchBuckets {
		h.counts[i].Add(1)
		h.addSum(v)
		return
	}
	b.counts[i]++
	b.n++
	b.sum += v
}

// Flush adds b to h and empties b.
func (h *Hist) Flush(b *Batch) {
	if b.n == 0 {
		return
	}
	for i, c := range b.counts[:min(len(h.counts), batchBuckets)] {
		if c != 0 {
			h.counts[i].Add(uint64(c))
		}
	}
	h.addSum(b.sum)
	*b = Batch{}
}

// Snapshot is the count, sum and cumulative bucket counts.
func (h *Hist) Snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.upper))
	for i, le := range h.upper {
		count += h.counts[i].Load()
		buckets[le] = count
	}
	count += h.counts[len(h.upper)].Load()
	return count, math.Float64frombits(h.sum.Load()), buckets
}

// Metric is the series as a const histogram of desc with the given label values.
func (h *Hist) Metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	count, sum, buckets := h.Snapshot()
	return prometheus.MustNewConstHistogram(desc, count, sum, buckets, labels...)
}

// Series is one unlabelled Hist with its description: a prometheus.Collector for
// a histogram that is not one series of a labelled family.
type Series struct {
	*Hist
	desc *prometheus.Desc
}

// NewSeries returns the histogram name with help and the given upper bounds.
func NewSeries(name, help string, upper []float64) *Series {
	return &Series{Hist: New(upper), desc: prometheus.NewDesc(name, help, nil, nil)}
}

// Describe implements prometheus.Collector.
func (s *Series) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// Collect implements prometheus.Collector.
func (s *Series) Collect(ch chan<- prometheus.Metric) { ch <- s.Metric(s.desc) }
