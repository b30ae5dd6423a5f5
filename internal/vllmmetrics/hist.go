package vllmmetrics

import (
	"github.com/switchyard-llm/switchyard/internal/fasthist"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// histVec is a histogram family labelled model_name and engine, observed on the
// output path: a request makes a dozen observations (one per output, ten at its
// end), on the goroutine that also writes the client's outputs, so each series is a
// fasthist.Hist (a bucket search and two atomics) and a scrape builds const
// histograms.
type histVec struct {
	upper []float64
	descs []*prometheus.Desc // the family, then names it is also exported under

	mu     sync.Mutex
	series map[[2]string]*fasthist.Hist // by model_name, engine
	order  []labelled                   // the same, in creation order, for a stable scrape
}

// labelled is one series with its label values.
type labelled struct {
	labels [2]string
	h      *fasthist.Hist
}

func newHistVec(name, help string, upper []float64) *histVec {
	return &histVec{
		upper:  upper,
		descs:  []*prometheus.Desc{prometheus.NewDesc(name, help, []string{"model_name", "engine"}, nil)},
		series: map[[2]string]*fasthist.Hist{},
	}
}

// alsoAs exports the same series under another name too.
func (v *histVec) alsoAs(name, help string) *histVec {
	v.descs = append(v.descs, prometheus.NewDesc(name, help, []string{"model_name", "engine"}, nil))
	return v
}

// with returns the series of model and engine, made on first use.
func (v *histVec) with(model, engine string) *fasthist.Hist {
	k := [2]string{model, engine}
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.series[k]
	if h == nil {
		h = fasthist.New(v.upper)
		v.series[k] = h
		v.order = append(v.order, labelled{k, h})
	}
	return h
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
		count, sum, buckets := s.h.Snapshot()
		for _, d := range v.descs {
			ch <- prometheus.MustNewConstHistogram(d, count, sum, buckets, s.labels[0], s.labels[1])
		}
	}
}
