package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// A batch to a ROUTER's peers: runs to one identity go out together, each peer gets
// its messages in order with their frames intact (small frames inlined, large ones
// by iovec), and only the message to an unknown identity fails.
func TestSendBatchRouter(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		r := mustListen(t, Router, endpoint(), Options{})
		a := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("A")})
		b := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("B")})
		for _, d := range []Socket{a, b} { // the ROUTER knows a peer once it has heard from it
			if err := d.Send([]byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, err := recvT(t, r); err != nil {
				t.Fatal(err)
			}
		}
		big := bytes.Repeat([]byte("x"), 3*inlineFrame)
		msgs := [][][]byte{
			{[]byte("A"), []byte("m0")},
			{[]byte("A"), []byte("m1"), big},
			{[]byte("B"), []byte("m2")},
			{[]byte("A"), big, []byte("m3")},
			{[]byte("X"), []byte("lost")},
			{[]byte("B"), []byte("m4"), {}, big},
		}
		var failed []int
		SendBatch(r, msgs, func(i int, err error) {
			failed = append(failed, i)
			if i == 4 && !errors.Is(err, ErrNoPeer) {
				t.Errorf("message 4: %v, want ErrNoPeer", err)
			}
		})
		if !slices.Equal(failed, []int{4}) {
			t.Errorf("failed %v, want [4]", failed)
		}
		for _, tt := range []struct {
			s    Socket
			want []int
		}{{a, []int{0, 1, 3}}, {b, []int{2, 5}}} {
			for _, i := range tt.want {
				got, err := recvT(t, tt.s)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, msgs[i][1:], bytes.Equal) {
					t.Errorf("message %d arrived as %q", i, got)
				}
			}
		}
	})
}

// Many goroutines sending to one peer at once: their messages are group-committed,
// and each must still arrive whole and, per sender, in order.
func TestConcurrentSendersOnePeer(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		pull := mustListen(t, Pull, endpoint(), Options{})
		push := mustDial(t, Push, pull.Addr(), Options{})
		const senders, each = 8, 300
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					head := binary.BigEndian.AppendUint32([]byte{byte(g)}, uint32(i))
					body := bytes.Repeat([]byte{byte(i)}, (i*37)%(2*inlineFrame+100))
					var err error
					if i%3 == 0 {
						SendBatch(push, [][][]byte{{head, body}, {head, body}}, func(_ int, e error) { err = e })
					} else {
						err = push.Send(head, body)
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		next := make([]int, senders)
		for n := 0; n < senders*(each+each/3); n++ {
			m, err := recvT(t, pull)
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 2 || len(m[0]) != 5 {
				t.Fatalf("message %d: %d frames %q", n, len(m), m)
			}
			g, i := int(m[0][0]), int(binary.BigEndian.Uint32(m[0][1:]))
			if want := bytes.Repeat([]byte{byte(i)}, (i*37)%(2*inlineFrame+100)); !bytes.Equal(m[1], want) {
				t.Fatalf("sender %d message %d: body of %d bytes corrupted", g, i, len(m[1]))
			}
			if i < next[g] || i > next[g]+1 {
				t.Fatalf("sender %d: message %d after %d", g, i, next[g])
			}
			next[g] = i
		}
		testwait.Wait(t, &wg, "the senders")
	})
}

// BenchmarkPushSend compares one Send per message with SendBatch of 64 for ~330 B
// messages (an ADD's size) over ipc.
func BenchmarkPushSend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
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
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range b.N {
					if _, err := pull.Recv(); err != nil {
						return
					}
				}
			}()
			typ, body := []byte{0}, bytes.Repeat([]byte("a"), 330)
			msgs := make([][][]byte, batch)
			for i := range msgs {
				msgs[i] = [][]byte{typ, body}
			}
			b.SetBytes(331)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				if n == 1 {
					if err := push.Send(typ, body); err != nil {
						b.Fatal(err)
					}
					continue
				}
				SendBatch(push, msgs[:n], func(_ int, err error) { b.Fatal(err) })
			}
			testwait.Recv(b, done, "the receiver to take every message")
		})
	}
}
