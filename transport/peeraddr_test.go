package transport

import (
	"context"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// A ROUTER tells a connected peer's remote address, and nothing for an unknown one.
func TestRouterPeerAddr(t *testing.T) {
	ctx := context.Background()
	r, err := Listen(ctx, Router, "tcp://127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := Dial(ctx, Dealer, r.Addr(), Options{Identity: []byte{7, 0}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Send([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	got := make(chan [][]byte, 1)
	go func() {
		frames, _ := r.Recv()
		got <- frames
	}()
	frames := testwait.Recv(t, got, "the dealer's message")
	pa := r.(PeerAddrer)
	if a := pa.PeerAddr(frames[0]); !strings.HasPrefix(a, "127.0.0.1:") {
		t.Fatalf("PeerAddr = %q, want 127.0.0.1:PORT", a)
	}
	if n := r.(PeerCounter).PeerCount(); n != 1 {
		t.Fatalf("PeerCount = %d, want 1", n)
	}
	if a := pa.PeerAddr([]byte{9, 9}); a != "" {
		t.Fatalf("PeerAddr of an unknown identity = %q", a)
	}
}
