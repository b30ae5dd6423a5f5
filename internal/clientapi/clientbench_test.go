package clientapi

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// BenchmarkClientOutputs is the client protocol's output path as the throughput bench
// drives it: one engine message with 256 one-token outputs -> HandleOutputs -> the
// client's batch -> EndBatch -> writer -> ipc -> a DEALER that decodes it. One op is
// one engine message; allocs/op are the server's per 256 outputs.
func BenchmarkClientOutputs(b *testing.B) { benchClientOutputs(b, 256) }

// BenchmarkClientOutputsStep is the same at the latency bench's load: an engine
// message of 4 one-token outputs, where the cost per message, not per output,
// decides (switchyard bench's 5,000 req/s over 8 engines steps about 5 requests
// per engine message).
func BenchmarkClientOutputsStep(b *testing.B) { benchClientOutputs(b, 4) }

func benchClientOutputs(b *testing.B, running int) {
	f := newFakeCore(b, 1)
	f.Hold.Store(true) // each ADD yields one output and stays live
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := ListenClients(ctx, ClientConfig{Address: "ipc://" + filepath.Join(b.TempDir(), "c")}, f.D)
	if err != nil {
		b.Fatal(err)
	}
	end := cs.EndBatch
	f.After.Store(&end)
	cli, err := transport.Dial(ctx, transport.Dealer, cs.Addr(), transport.Options{Identity: []byte("client-1")})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var dec wire.OutputsDecoder
		var outs wire.EngineCoreOutputs
		for {
			msg, err := cli.Recv()
			if err != nil {
				return
			}
			if dec.Decode(msg, &outs) == nil {
				got.Add(int64(len(outs.Outputs)))
			}
		}
	}()
	b.Cleanup(func() {
		cli.Close()
		testwait.Closed(b, done, "the client's reader to end")
		f.D.Close()
		cs.Close()
	})
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1 << 30)
	sp.IgnoreEOS = true
	sp.Normalize()
	msg := &wire.EngineCoreOutputs{SchedulerStats: &wire.SchedulerStats{NumRunningReqs: int64(running)}}
	tok := []int64{7}
	for i := range running {
		id := fmt.Sprint("r", i)
		body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2}, Sampling: &sp})
		if err != nil {
			b.Fatal(err)
		}
		if err := cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
			b.Fatal(err)
		}
		msg.Outputs = append(msg.Outputs, wire.EngineCoreOutput{RequestID: "c636c69656e742d31-" + id, NewTokenIDs: tok, FinishReason: wire.FinishNone})
	}
	wait := func(n int64) {
		for got.Load() < n {
			select {
			case <-ctx.Done():
				b.Fatalf("client received %d of %d outputs", got.Load(), n)
			case <-time.After(100 * time.Microsecond):
			}
		}
	}
	wait(int64(running)) // every request's first output: all are live
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.Handle(0, msg)
	}
	wait(int64(running) * int64(b.N+1))
	b.StopTimer()
	b.ReportMetric(float64(running)*float64(b.N)/b.Elapsed().Seconds(), "outputs/s")
}
