package transport

import (
	"errors"
	"testing"
)

// TestJoinEvents: a ROUTER with JoinEvents reports each admitted peer before
// its first message; without the option nothing changes.
func TestJoinEvents(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{JoinEvents: true})
		d := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{3, 0}})
		if err := d.Send([]byte("reg")); err != nil {
			t.Fatal(err)
		}
		_, err := recvT(t, r)
		var joined *PeerJoinedError
		if !errors.As(err, &joined) || !errors.Is(err, ErrPeerJoined) || string(joined.Identity) != "\x03\x00" {
			t.Fatalf("first Recv: %v, want the join of 0300", err)
		}
		f, err := recvT(t, r)
		if err != nil || len(f) != 2 || string(f[1]) != "reg" {
			t.Fatalf("second Recv: %q %v", f, err)
		}

		plain := mustListen(t, Router, ep(), Options{})
		d2 := mustDial(t, Dealer, plain.Addr(), Options{Identity: []byte{4, 0}})
		if err := d2.Send([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, plain); err != nil || string(f[1]) != "x" {
			t.Fatalf("without JoinEvents: %q %v", f, err)
		}
	})
}
