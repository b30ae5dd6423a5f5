package memtransport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recv is s.Recv bounded by testwait.Deadline of the bubble's clock: a Recv that
// never returns fails naming what it waited for, not as a bare deadlock.
func recv(t *testing.T, s transport.Socket, what string) ([][]byte, error) {
	t.Helper()
	return testwait.Result(t, what, s.Recv)
}

func TestRouterDealerTimeoutAndPeerLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		ctx := context.Background()
		r, _ := n.Listen(ctx, transport.Router, "tcp://h:0", transport.Options{SendTimeout: time.Second})
		p, _ := n.Listen(ctx, transport.Pull, "ipc://out", transport.Options{})
		defer r.Close()
		defer p.Close()
		d, err := n.Dial(ctx, transport.Dealer, r.Addr(), transport.Options{Identity: []byte{1, 0}, RecvQueue: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Dial(ctx, transport.Dealer, r.Addr(), transport.Options{Identity: []byte{1, 0}}); err == nil {
			t.Fatal("duplicate identity accepted")
		}
		d.Send([]byte("reg"))
		if f, err := recv(t, r, "the dealer's registration"); err != nil || string(f[0]) != "\x01\x00" || string(f[1]) != "reg" {
			t.Fatalf("router got %q %v", f, err)
		}
		r.Send([]byte{1, 0}, []byte("one")) // fills the dealer's queue of 1
		start := time.Now()
		if err := r.Send([]byte{1, 0}, []byte("two")); !errors.Is(err, transport.ErrSendTimeout) || time.Since(start) != time.Second {
			t.Fatalf("want a send timeout after 1s, got %v after %v", err, time.Since(start))
		}
		push, _ := n.Dial(ctx, transport.Push, p.Addr(), transport.Options{})
		push.Send([]byte("x"))
		push.Close()
		if f, err := recv(t, p, "the push's message"); err != nil || string(f[0]) != "x" {
			t.Fatalf("pull got %q %v", f, err)
		}
		if _, err := recv(t, p, "the push's departure"); !errors.Is(err, transport.ErrPeerLeft) {
			t.Fatalf("want peer left, got %v", err)
		}
		d.Close()
	})
}

// A socket with a Handler delivers messages and departures to it, in order, and
// refuses Recv; Close waits for the handler (the frontend's engine output PULLs).
func TestHandlerDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		ctx := context.Background()
		var got []string
		p, _ := n.Listen(ctx, transport.Pull, "ipc://h", transport.Options{Handler: func(f [][]byte, err error) {
			if err != nil {
				got = append(got, "left:"+fmt.Sprint(errors.Is(err, transport.ErrPeerLeft)))
				return
			}
			got = append(got, string(f[0]))
		}})
		if _, err := recv(t, p, "Recv's refusal on a handler socket"); !errors.Is(err, transport.ErrUnsupported) {
			t.Fatalf("Recv on a handler socket: %v", err)
		}
		push, _ := n.Dial(ctx, transport.Push, p.Addr(), transport.Options{})
		push.Send([]byte("a"))
		push.Send([]byte("b"))
		push.Close()
		synctest.Wait()
		p.Close()
		if want := []string{"a", "b", "left:true"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
	})
}
