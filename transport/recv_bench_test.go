package transport

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// BenchmarkPullRecv measures the receive path (read, frame, allocate, queue) for an
// engine output without aux frames (~250 B) and for one with aux tensors of 300 B,
// 100 KiB and 1 MiB, over ipc. The sender batches, so the reader is the bottleneck.
func BenchmarkPullRecv(b *testing.B) {
	for _, tt := range []struct {
		name   string
		frames [][]byte
	}{
		{"250B", [][]byte{bytes.Repeat([]byte("o"), 250)}},
		{"aux1MiB", [][]byte{bytes.Repeat([]byte("o"), 250), bytes.Repeat([]byte("x"), 300), bytes.Repeat([]byte("y"), 100<<10), bytes.Repeat([]byte("z"), 1<<20)}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			ctx := b.Context()
			pull, err := Listen(ctx, Pull, "ipc://"+filepath.Join(b.TempDir(), "p"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer pull.Close()
			push, err := Dial(ctx, Push, pull.Addr(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer push.Close()
			size := 0
			for _, f := range tt.frames {
				size += len(f)
			}
			msgs := make([][][]byte, 64)
			for i := range msgs {
				msgs[i] = tt.frames
			}
			stop := make(chan struct{})
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for {
					select {
					case <-stop:
						return
					default:
					}
					var failed bool
					SendBatch(push, msgs, func(int, error) { failed = true })
					if failed {
						return
					}
				}
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := pull.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			pull.Close() // unblocks a sender stuck on a full socket
			testwait.Recv(b, sent, "the sender to stop")
		})
	}
}
