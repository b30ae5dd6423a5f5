package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// SendBatchNow to a ROUTER's peers: what it accepts arrives whole and in order,
// an unknown identity fails alone.
func TestSendBatchNowRouter(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		r := mustListen(t, Router, endpoint(), Options{})
		a := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("A")})
		if err := a.Send([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil {
			t.Fatal(err)
		}
		big := bytes.Repeat([]byte("x"), 3*inlineFrame)
		msgs := [][][]byte{
			{[]byte("A"), []byte("m0")},
			{[]byte("A"), []byte("m1"), big, {}},
			{[]byte("X"), []byte("lost")},
			{[]byte("A"), big, []byte("m3")},
		}
		var failed []int
		if !SendBatchNow(r, msgs, func(i int, err error) {
			failed = append(failed, i)
			if !errors.Is(err, ErrNoPeer) {
				t.Errorf("message %d: %v, want ErrNoPeer", i, err)
			}
		}) {
			t.Fatal("a ROUTER is a NowSender")
		}
		if len(failed) != 1 || failed[0] != 2 {
			t.Errorf("failed %v, want [2]", failed)
		}
		for _, i := range []int{0, 1, 3} {
			got, err := recvT(t, a)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(msgs[i])-1 {
				t.Fatalf("message %d arrived with %d frames", i, len(got))
			}
			for k := range got {
				if !bytes.Equal(got[k], msgs[i][k+1]) {
					t.Fatalf("message %d frame %d differs", i, k)
				}
			}
		}
	})
}

// A peer that stops reading: SendBatchNow never waits for it. Once the kernel's
// buffers are full the rest of a write is finished by the connection, and further
// messages fail with ErrWouldBlock, unsent; when the peer reads again, every
// accepted message arrives whole and in order, with waiting Sends mixed in.
func TestSendBatchNowStalledPeer(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		r := mustListen(t, Router, endpoint(), Options{})
		a := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("A"), RecvQueue: 1})
		if err := a.Send([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil {
			t.Fatal(err)
		}
		msg := func(seq uint32) [][]byte {
			body := bytes.Repeat([]byte{byte(seq)}, 48<<10)
			binary.BigEndian.PutUint32(body, seq)
			return [][]byte{[]byte("A"), body}
		}
		var accepted []uint32
		blocked := 0
		var seq uint32
		for blocked < 3 && seq < 4096 {
			seq++
			var err error
			SendBatchNow(r, [][][]byte{msg(seq)}, func(_ int, e error) { err = e })
			switch {
			case err == nil:
				accepted = append(accepted, seq)
			case errors.Is(err, ErrWouldBlock):
				blocked++
			default:
				t.Fatal(err)
			}
		}
		if blocked == 0 {
			t.Fatalf("%d messages of 48 KiB to a peer that does not read never filled its buffers", seq)
		}
		// A waiting Send queues behind the unwritten rest and goes out after it.
		seq++
		sent := make(chan error, 1)
		go func() { sent <- r.Send(msg(seq)...) }()
		want := append(accepted, seq)
		for _, w := range want {
			got, err := recvT(t, a)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(got[0]) != 48<<10 || binary.BigEndian.Uint32(got[0]) != w || got[0][len(got[0])-1] != byte(w) {
				t.Fatalf("want message %d whole, got %d frames (first %d bytes)", w, len(got), len(got[0]))
			}
		}
		if err := testwait.Recv(t, sent, "the queued Send to return"); err != nil {
			t.Fatal(err)
		}
	})
}

// Senders of both kinds at once to one peer: every accepted message arrives whole
// and, per sender, in order.
func TestSendBatchNowConcurrent(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		pull := mustListen(t, Pull, endpoint(), Options{})
		push := mustDial(t, Push, pull.Addr(), Options{})
		const senders, each = 6, 300
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					m := [][]byte{{byte(g)}, binary.BigEndian.AppendUint32(nil, uint32(i)), bytes.Repeat([]byte{byte(i)}, (i*53)%(3*inlineFrame))}
					var err error
					if g%2 == 0 {
						err = push.Send(m...)
					} else {
						SendBatchNow(push, [][][]byte{m}, func(_ int, e error) { err = e })
						for errors.Is(err, ErrWouldBlock) {
							err = push.Send(m...)
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					total++
					mu.Unlock()
				}
			}()
		}
		last := make([]int, senders)
		for i := range last {
			last[i] = -1
		}
		for n := 0; n < senders*each; n++ {
			got, err := recvT(t, pull)
			if err != nil {
				t.Fatal(err)
			}
			g, i := int(got[0][0]), int(binary.BigEndian.Uint32(got[1]))
			if i != last[g]+1 {
				t.Fatalf("sender %d: message %d after %d", g, i, last[g])
			}
			last[g] = i
			if len(got[2]) != (i*53)%(3*inlineFrame) || (len(got[2]) > 0 && got[2][0] != byte(i)) {
				t.Fatalf("sender %d message %d: body of %d bytes", g, i, len(got[2]))
			}
		}
		testwait.Wait(t, &wg, "the senders")
	})
}
