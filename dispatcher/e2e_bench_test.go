package dispatcher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/testwait"
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
	stop := make(chan struct{})
	var bg sync.WaitGroup
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
	submitLat, deliverLat := dispatcher.PacedLatency(b, st.d, &st.ts.sentAt, 10000, 2048, func(id string) *wire.EngineCoreRequest {
		return request(id, 20)
	})
	close(stop)
	testwait.Wait(b, &bg, "the ping loop to stop")
	dispatcher.ReportPercentiles(b, "submit", submitLat)
	dispatcher.ReportPercentiles(b, "deliver", deliverLat)
	dispatcher.ReportPercentiles(b, "transport-rtt", pings)
}
