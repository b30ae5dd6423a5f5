package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// timedSender stamps each ADD's Submit-side span: Sender.Send entry, keyed by id.
type timedSender struct {
	next   dispatcher.Sender
	sentAt sync.Map
}

func (s *timedSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	at := time.Now()
	if typ == wire.RequestAdd {
		var req wire.EngineCoreRequest
		if wire.DecodeAdd(append([][]byte{body}, aux...), &req) == nil {
			s.sentAt.Store(req.RequestID, at)
		}
	}
	return s.next.Send(rank, typ, body, aux)
}

// stampingAdapter records when each output message reached the dispatcher, in the
// outputs' NumNaNsInLogits (the mock never sets it), so readers can time delivery.
type stampingAdapter struct{ *adapter }

func (a stampingAdapter) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	now := time.Now().UnixNano()
	for i := range outs.Outputs {
		outs.Outputs[i].NumNaNsInLogits = now
	}
	a.adapter.HandleOutputs(rank, outs)
}

// BenchmarkE2ELatency: 8 mock engines over tcp, b.N requests at 10k requests/s with
// 2048 concurrent streams (256 per engine), 20 tokens each. Reports the dispatcher's
// spans (Submit entry -> Sender.Send; output message handed to the dispatcher -> Recv
// returns) next to the raw transport round trip measured in the same run (a utility
// ping to one engine every 10 ms: frontend write, engine, engine write, frontend read).
func BenchmarkE2ELatency(b *testing.B) {
	st := newStack(b, "tcp", 8, stackOpts{timed: true})
	const rate = 10000
	permits := make(chan struct{}, rate)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
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
	var pings []time.Duration
	bg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t0 := time.Now()
				if _, err := st.d.CallUtility(context.Background(), "is_sleeping"); err == nil {
					pings = append(pings, time.Since(t0))
				}
			case <-stop:
				return
			}
		}
	})
	var mu sync.Mutex
	var submitLat, deliverLat []time.Duration
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 2048 {
		wg.Go(func() {
			ctx := context.Background()
			var ms, md []time.Duration
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					break
				}
				<-permits
				req := request(fmt.Sprint("lat-", i), 20)
				t0 := time.Now()
				s, err := st.d.Submit(ctx, req)
				if err != nil {
					b.Error(err)
					return
				}
				if at, ok := st.ts.sentAt.LoadAndDelete(req.RequestID); ok {
					ms = append(ms, at.(time.Time).Sub(t0))
				}
				for {
					o, err := s.Recv(ctx)
					if err != nil {
						break
					}
					md = append(md, time.Since(time.Unix(0, o.NumNaNsInLogits)))
				}
			}
			mu.Lock()
			submitLat, deliverLat = append(submitLat, ms...), append(deliverLat, md...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	close(stop)
	bg.Wait()
	pct(b, "submit", submitLat)
	pct(b, "deliver", deliverLat)
	pct(b, "transport-rtt", pings)
}

func pct(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, name+"-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, name+"-p99-µs")
}
