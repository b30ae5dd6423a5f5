package bench

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds. Values are nanoseconds; 3 significant digits keep every
// percentile within 0.1 % of the true value, and 1 ns .. 100 s covers a loopback hop
// as well as a stalled engine. Larger values are clamped (and counted), never lost.
const (
	histLowest  = 1
	histHighest = int64(100 * time.Second)
	histDigits  = 3
)

// Hist is a latency histogram in nanoseconds. It is not safe for concurrent use: each
// recording goroutine keeps its own and they are merged after the run.
type Hist struct {
	h       *hdrhistogram.Histogram
	clamped int64 // values outside the trackable range, recorded at the nearest bound
}

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{h: hdrhistogram.New(histLowest, histHighest, histDigits)}
}

// Record adds one sample. Negative values (clock steps across processes) and values
// past the upper bound are clamped so the count stays honest; Clamped reports them.
func (h *Hist) Record(d time.Duration) {
	v := int64(d)
	switch {
	case v < histLowest:
		v = histLowest
		h.clamped++
	case v > histHighest:
		v = histHighest
		h.clamped++
	}
	// Cannot fail: v is within the trackable range.
	_ = h.h.RecordValue(v)
}

// Merge adds every sample of o.
func (h *Hist) Merge(o *Hist) {
	h.h.Merge(o.h)
	h.clamped += o.clamped
}

// Count is the number of samples.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// Clamped is the number of samples that fell outside the trackable range.
func (h *Hist) Clamped() int64 { return h.clamped }

// Quantile returns the value at quantile q in [0, 1].
func (h *Hist) Quantile(q float64) time.Duration {
	return time.Duration(h.h.ValueAtQuantile(q * 100))
}

// cdfQuantiles are the points written to the JSON report and drawn in the chart:
// dense in the tail, where dispatch problems show.
var cdfQuantiles = []float64{
	0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97,
	0.99, 0.995, 0.999, 0.9995, 0.9999, 1,
}

// Summary is a histogram reduced to the figures a report states, in microseconds.
type Summary struct {
	Count   int64      `json:"count"`
	Clamped int64      `json:"clamped,omitempty"`
	MinUS   float64    `json:"min_us"`
	MeanUS  float64    `json:"mean_us"`
	P50US   float64    `json:"p50_us"`
	P90US   float64    `json:"p90_us"`
	P99US   float64    `json:"p99_us"`
	P999US  float64    `json:"p999_us"`
	MaxUS   float64    `json:"max_us"`
	CDF     []CDFPoint `json:"cdf,omitempty"`
}

// CDFPoint is one point of a latency CDF: the fraction of samples at or below ValueUS.
type CDFPoint struct {
	Quantile float64 `json:"q"`
	ValueUS  float64 `json:"us"`
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// Summarize reduces h; an empty histogram gives a zero Summary with Count 0.
func (h *Hist) Summarize() Summary {
	if h.Count() == 0 {
		return Summary{}
	}
	s := Summary{
		Count:   h.Count(),
		Clamped: h.clamped,
		MinUS:   us(h.h.Min()),
		MeanUS:  h.h.Mean() / 1e3,
		P50US:   us(h.h.ValueAtQuantile(50)),
		P90US:   us(h.h.ValueAtQuantile(90)),
		P99US:   us(h.h.ValueAtQuantile(99)),
		P999US:  us(h.h.ValueAtQuantile(99.9)),
		MaxUS:   us(h.h.Max()),
	}
	s.CDF = make([]CDFPoint, len(cdfQuantiles))
	for i, q := range cdfQuantiles {
		v := h.h.ValueAtQuantile(q * 100)
		if q == 0 {
			v = h.h.Min()
		}
		s.CDF[i] = CDFPoint{Quantile: q, ValueUS: us(v)}
	}
	return s
}
