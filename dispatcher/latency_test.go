package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// The latency harness shared by BenchmarkLatency (in-process engines) and
// BenchmarkE2ELatency (mock engines over a transport, package dispatcher_test, hence
// the exported names, which exist only in test builds).

// PacedLatency runs b.N requests, "lat-<i>" built by newReq, at rate requests/s
// (released every millisecond) from workers concurrent streams, each read to its
// end, and returns two spans: per request, Submit entry to Sender.Send entry (read
// from sentAt, which the Sender fills keyed by request id); per output, the time since
// the engine side stamped the output message's arrival in NumNaNsInLogits to Recv
// returning. The timer runs from the first request to the last stream's end.
func PacedLatency(b *testing.B, d *Dispatcher, sentAt *sync.Map, rate, workers int, newReq func(id string) *wire.EngineCoreRequest) (submitLat, deliverLat []time.Duration) {
	permits := make(chan struct{}, rate)
	stop := make(chan struct{})
	var pacer sync.WaitGroup
	pacer.Go(func() {
		ticks := time.NewTicker(time.Millisecond)
		defer ticks.Stop()
		for {
			select {
			case <-ticks.C:
				for range rate / 1000 {
					select {
					case permits <- struct{}{}:
					default:
					}
				}
			case <-stop:
				return
			}
		}
	})
	defer func() { close(stop); testwait.Wait(b, &pacer, "the pacer to stop") }()

	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			ctx := context.Background()
			var mySubmit, myDeliver []time.Duration
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					break
				}
				<-permits
				req := newReq(fmt.Sprint("lat-", i))
				t0 := time.Now()
				st, err := d.Submit(ctx, req)
				if err != nil {
					b.Error(err)
					return
				}
				if at, ok := sentAt.LoadAndDelete(req.RequestID); ok {
					mySubmit = append(mySubmit, at.(time.Time).Sub(t0))
				}
				for {
					o, err := st.Recv(ctx)
					if err != nil {
						break
					}
					myDeliver = append(myDeliver, time.Since(time.Unix(0, o.NumNaNsInLogits)))
				}
			}
			mu.Lock()
			submitLat = append(submitLat, mySubmit...)
			deliverLat = append(deliverLat, myDeliver...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	return submitLat, deliverLat
}

// ReportPercentiles reports the p50 and p99 of ds in µs as name-p50-µs and
// name-p99-µs (nothing when ds is empty).
func ReportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, name+"-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, name+"-p99-µs")
}
