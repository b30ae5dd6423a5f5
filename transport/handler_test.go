package transport

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A ROUTER with a Handler: each peer's messages arrive in order on its reader, its
// departure after them, and its identity is free for a new connection once the
// departure was handled; Recv is refused.
func TestHandlerRouter(t *testing.T) {
	forEachTransport(t, func(t *testing.T, endpoint func() string) {
		type event struct {
			id, body string
			left     bool
		}
		var mu sync.Mutex
		var events []event
		got := make(chan struct{}, 1024)
		r := mustListen(t, Router, endpoint(), Options{PeerEvents: true, Handler: func(frames [][]byte, err error) {
			mu.Lock()
			var left *PeerLeftError
			switch {
			case errors.As(err, &left):
				events = append(events, event{id: string(left.Identity), left: true})
			case err == nil:
				events = append(events, event{id: string(frames[0]), body: string(frames[1])})
			}
			mu.Unlock()
			got <- struct{}{}
		}})
		if _, err := recvT(t, r); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Recv on a socket with a Handler: %v, want ErrUnsupported", err)
		}
		wait := func(n int) {
			t.Helper()
			for range n {
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					t.Fatal("handler not called")
				}
			}
		}
		const each = 50
		a := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("A")})
		b := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("B")})
		for i := range each {
			if err := a.Send([]byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
			if err := b.Send([]byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		wait(2 * each)
		a.Close()
		wait(1)
		// The same identity connects again and is heard.
		a2 := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte("A")})
		if err := a2.Send([]byte("again")); err != nil {
			t.Fatal(err)
		}
		wait(1)
		mu.Lock()
		defer mu.Unlock()
		next := map[string]int{}
		leftAt := -1
		for i, e := range events {
			switch {
			case e.left:
				if e.id != "A" || next["A"] != each {
					t.Fatalf("departure of %q after %d of its messages", e.id, next[e.id])
				}
				leftAt = i
			case e.id == "A" && leftAt >= 0:
				if e.body != "again" {
					t.Fatalf("after A left: %q", e.body)
				}
			default:
				if e.body != strconv.Itoa(next[e.id]) {
					t.Fatalf("peer %s: message %q, want %d", e.id, e.body, next[e.id])
				}
				next[e.id]++
			}
		}
		if next["A"] != each || next["B"] != each || leftAt < 0 || events[len(events)-1].body != "again" {
			t.Fatalf("events: A %d, B %d, departure at %d, last %+v", next["A"], next["B"], leftAt, events[len(events)-1])
		}
	})
}
