package transport

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// At MaxConns a listener closes new connections as it accepts them, so a flood of
// idle connections (that never finish the ZMTP greeting) holds at most MaxConns
// file descriptors; a peer that fits still gets through once room is made.
func TestMaxConns(t *testing.T) {
	r := mustListen(t, Router, "tcp://127.0.0.1:0", Options{MaxConns: 3})
	addr := strings.TrimPrefix(r.Addr(), "tcp://")
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, testwait.Deadline)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// The fourth is accepted and closed at once: its read sees the close.
	c, err := net.DialTimeout("tcp", addr, testwait.Deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for {
		if _, err = c.Read(buf); err != nil {
			break
		}
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection over MaxConns was kept open")
	}
	// Room again: a real peer gets through.
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The listener frees a slot once it sees the idle connection close.
		if d, err := Dial(ctxT(t), Dealer, r.Addr(), Options{Identity: []byte("ok"), DialTimeout: time.Second}); err == nil {
			err = d.Send([]byte("hi"))
			if err == nil {
				f, rerr := recvT(t, r)
				d.Close()
				if rerr == nil && string(f[len(f)-1]) == "hi" {
					return
				}
			} else {
				d.Close()
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no peer got through after the idle connections closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
