package dispatcher

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// withVLLM runs bench with the vllm:* series recorded.
func withVLLM(b *testing.B, bench func(*testing.B)) {
	benchVLLM = true
	defer func() { benchVLLM = false }()
	bench(b)
}

// BenchmarkSubmitVLLM is BenchmarkSubmit recording the vllm:* series.
func BenchmarkSubmitVLLM(b *testing.B) { withVLLM(b, BenchmarkSubmit) }

// BenchmarkRouteOutputsVLLM is BenchmarkRouteOutputs recording the vllm:* series.
func BenchmarkRouteOutputsVLLM(b *testing.B) { withVLLM(b, BenchmarkRouteOutputs) }

// BenchmarkRouteOutputsFuncVLLM is BenchmarkRouteOutputsFunc recording the vllm:* series.
func BenchmarkRouteOutputsFuncVLLM(b *testing.B) { withVLLM(b, BenchmarkRouteOutputsFunc) }

// nopSender drops frames after returning their buffers, so benchmarks measure the
// dispatcher alone.
type nopSender struct{}

func (nopSender) Send(_ int, _ byte, body []byte, _ [][]byte) error {
	wire.PutBuffer(body)
	return nil
}

// benchVLLM makes benchDispatcher record the vllm:* series too (the ...VLLM
// benchmarks), to show what they cost on the hot path.
var benchVLLM bool

func benchDispatcher(b *testing.B, engines int) *Dispatcher {
	var cfg Config
	if benchVLLM {
		vm, err := vllmmetrics.New(prometheus.NewRegistry(), "bench-model", 4096)
		if err != nil {
			b.Fatal(err)
		}
		cfg.VLLM = vm
	}
	d, err := New(cfg, nopSender{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	for r := range engines {
		d.EngineUp(r)
	}
	return d
}

// BenchmarkSubmit is Submit entry to the ADD handed to the Sender (validate, choose,
// table insert, encode, send), 8 engines, up to 1024 live requests.
func BenchmarkSubmit(b *testing.B) {
	d := benchDispatcher(b, 8)
	const window = 1024
	ids := make([]string, window)
	for i := range ids {
		ids[i] = fmt.Sprint("cmpl-bench-", i)
	}
	req := mkReq("x")
	streams := make([]*Stream, 0, window)
	finish := make([]*wire.EngineCoreOutputs, 8)
	for r := range finish {
		finish[r] = batch(r)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.RequestID = ids[i%window]
		s, err := d.Submit(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		streams = append(streams, s)
		if len(streams) == window {
			b.StopTimer()
			for _, f := range finish {
				f.Outputs = f.Outputs[:0]
			}
			for _, s := range streams {
				finish[s.Rank()].Outputs = append(finish[s.Rank()].Outputs, finOut(s.ID(), wire.FinishStop))
			}
			for r, f := range finish {
				d.HandleOutputs(r, f)
			}
			streams = streams[:0]
			b.StartTimer()
		}
	}
}

// BenchmarkRouteOutputs is HandleOutputs to the output read by Stream.Recv: 8 engines
// with 256 live streams each; one op is one engine's step of 256 one-token outputs.
func BenchmarkRouteOutputs(b *testing.B) {
	const engines, perEngine = 8, 256
	d := benchDispatcher(b, engines)
	streams := make([][]*Stream, engines)
	ctx := context.Background()
	steps := routeSteps(b, engines, perEngine, func(req *wire.EngineCoreRequest, r int) error {
		s, err := d.Submit(ctx, req)
		if err != nil {
			return err
		}
		streams[r] = append(streams[r], s)
		return nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r := i % engines
		d.HandleOutputs(r, steps[r])
		for _, s := range streams[r] {
			if _, err := s.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerOutput(b, time.Since(start), perEngine)
}

// BenchmarkRouteOutputsFunc is BenchmarkRouteOutputs for SubmitFunc callbacks.
func BenchmarkRouteOutputsFunc(b *testing.B) {
	const engines, perEngine = 8, 256
	d := benchDispatcher(b, engines)
	var delivered atomic.Int64
	deliver := func(int, *wire.EngineCoreOutput, error) { delivered.Add(1) }
	steps := routeSteps(b, engines, perEngine, func(req *wire.EngineCoreRequest, _ int) error {
		_, err := d.SubmitFunc(req, deliver)
		return err
	})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r := i % engines
		d.HandleOutputs(r, steps[r])
	}
	reportPerOutput(b, time.Since(start), perEngine)
}

// routeSteps submits perEngine requests pinned to each of engines ranks and returns,
// per rank, one engine step with a one-token output for each of its requests.
func routeSteps(b *testing.B, engines, perEngine int, submit func(req *wire.EngineCoreRequest, rank int) error) []*wire.EngineCoreOutputs {
	steps := make([]*wire.EngineCoreOutputs, engines)
	for r := range engines {
		steps[r] = batch(r)
		for i := range perEngine {
			id := fmt.Sprintf("cmpl-%d-%d", r, i)
			req := pinned(id, int64(r))
			// Outputs never finish: a budget no step reaches (still counted per output).
			req.Sampling.MaxTokens = wire.SomeInt(math.MaxInt32)
			if err := submit(req, r); err != nil {
				b.Fatal(err)
			}
			steps[r].Outputs = append(steps[r].Outputs, tokOut(id, 1))
		}
	}
	return steps
}

// reportPerOutput reports the throughput and cost per output of b.N steps of
// perEngine outputs that took el.
func reportPerOutput(b *testing.B, el time.Duration, perEngine int) {
	b.ReportMetric(float64(b.N*perEngine)/el.Seconds(), "outputs/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*perEngine), "ns/output")
}

// BenchmarkLatency runs b.N requests at 10k requests/s over 8 in-process engines that
// step every 10 ms (20 tokens per request, so about 256 live streams per engine) and
// reports percentiles of the two spans the dispatcher owns: Submit entry to
// Sender.Send entry, and the engine's HandleOutputs call to the reader's Recv
// returning. Run it with -benchtime=30000x for a stable sample.
func BenchmarkLatency(b *testing.B) {
	s := newSim(b, Config{}, 8, func(e *simEngine) { e.step, e.stamp = 10*time.Millisecond, true })
	var sentAt sync.Map
	s.sender.sentAt = &sentAt
	// 10k requests/s from 2048 streams, 256 concurrent per engine.
	submitLat, deliverLat := PacedLatency(b, s.d, &sentAt, 10000, 2048, func(id string) *wire.EngineCoreRequest {
		req := mkReq(id)
		req.Sampling.MaxTokens = wire.SomeInt(20)
		return req
	})
	ReportPercentiles(b, "submit", submitLat)
	ReportPercentiles(b, "deliver", deliverLat)
}
