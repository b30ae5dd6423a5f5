package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forEachTransport runs body over ipc:// and tcp://; endpoint returns a fresh
// bindable endpoint each call.
func forEachTransport(t *testing.T, body func(t *testing.T, endpoint func() string)) {
	t.Run("ipc", func(t *testing.T) {
		dir := t.TempDir()
		n := 0
		body(t, func() string {
			n++
			return "ipc://" + filepath.Join(dir, "s"+string(rune('a'+n)))
		})
	})
	t.Run("tcp", func(t *testing.T) {
		body(t, func() string { return "tcp://127.0.0.1:0" })
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustListen(t *testing.T, kind Kind, ep string, opt Options) Socket {
	t.Helper()
	s, err := Listen(ctxT(t), kind, ep, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustDial(t *testing.T, kind Kind, ep string, opt Options) Socket {
	t.Helper()
	s, err := Dial(ctxT(t), kind, ep, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recvT receives with a deadline so a broken test fails instead of hanging.
func recvT(t *testing.T, s Socket) ([][]byte, error) {
	t.Helper()
	type res struct {
		f   [][]byte
		err error
	}
	ch := make(chan res, 1)
	go func() { f, err := s.Recv(); ch <- res{f, err} }()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-time.After(10 * time.Second):
		s.Close()
		testwait.Recv(t, ch, "Recv to return after Close")
		t.Fatal("recv timed out")
		return nil, nil
	}
}

func TestRouterDealerRoundTrip(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{})
		d0 := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{0, 0}})
		d1 := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{1, 0}})
		for _, d := range []Socket{d0, d1} {
			if err := d.Send([]byte("hello"), []byte("aux")); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		for range 2 {
			f, err := recvT(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(f) != 3 || string(f[1]) != "hello" || string(f[2]) != "aux" {
				t.Fatalf("frames %q", f)
			}
			seen[string(f[0])] = true
		}
		if !seen["\x00\x00"] || !seen["\x01\x00"] {
			t.Fatalf("identities %v", seen)
		}
		big := bytes.Repeat([]byte{7}, 100<<10) // takes the writev path
		if err := r.Send([]byte{1, 0}, []byte{0}, big); err != nil {
			t.Fatal(err)
		}
		f, err := recvT(t, d1)
		if err != nil || len(f) != 2 || f[0][0] != 0 || !bytes.Equal(f[1], big) {
			t.Fatalf("dealer got %d frames, err %v", len(f), err)
		}
		if err := r.Send([]byte{9, 9}, []byte("x")); !errors.Is(err, ErrNoPeer) {
			t.Fatalf("send to unknown identity: %v", err)
		}
	})
}

func TestPullReportsPeerLeft(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		p := mustListen(t, Pull, ep(), Options{})
		push, err := Dial(ctxT(t), Push, p.Addr(), Options{Identity: []byte{3, 0}})
		if err != nil {
			t.Fatal(err)
		}
		if err := push.Send([]byte("out")); err != nil {
			t.Fatal(err)
		}
		f, err := recvT(t, p)
		if err != nil || string(f[0]) != "out" {
			t.Fatalf("got %q %v", f, err)
		}
		push.Close()
		_, err = recvT(t, p)
		var left *PeerLeftError
		if !errors.Is(err, ErrPeerLeft) || !errors.As(err, &left) || !bytes.Equal(left.Identity, []byte{3, 0}) {
			t.Fatalf("want peer left from 0300, got %v", err)
		}
		p.Close()
		if _, err := recvT(t, p); !errors.Is(err, ErrClosed) {
			t.Fatalf("recv after close: %v", err)
		}
	})
}

func TestDuplicateIdentityRefused(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{})
		first := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{2, 0}})
		if err := first.Send([]byte("a")); err != nil { // the router knows it once this arrives
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil {
			t.Fatal(err)
		}
		// The router closes the duplicate before its handshake completes (so a
		// libzmq peer keeps what it queued for its next connection): the dial fails.
		if second, err := Dial(ctxT(t), Dealer, r.Addr(), Options{Identity: []byte{2, 0}, PeerEvents: true}); err == nil {
			second.Close()
			t.Fatal("duplicate identity admitted")
		}
		if err := r.Send([]byte{2, 0}, []byte("only-first")); err != nil {
			t.Fatal(err)
		}
		f, err := recvT(t, first)
		if err != nil || string(f[0]) != "only-first" {
			t.Fatalf("first got %q %v", f, err)
		}
	})
}

func TestFrameTooLargeDropsPeer(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		p := mustListen(t, Pull, ep(), Options{MaxFrameSize: 1024})
		push := mustDial(t, Push, p.Addr(), Options{})
		if err := push.Send(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, p); err != nil || len(f[0]) != 1000 {
			t.Fatalf("small frame: %v", err)
		}
		if err := push.Send(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		_, err := recvT(t, p)
		if !errors.Is(err, ErrPeerLeft) || !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("want peer left by frame too large, got %v", err)
		}
	})
}

// A peer that never reads must not stall sends to another peer of the same ROUTER
// (zmq4's ROUTER holds one lock for all peers and blocked > 3 s in the same setup).
func TestStalledPeerDoesNotBlockOthers(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{SendTimeout: 300 * time.Millisecond})
		stalled := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{0, 0}, RecvQueue: 1})
		healthy := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{1, 0}})
		for _, d := range []Socket{stalled, healthy} {
			d.Send([]byte("reg"))
			if _, err := recvT(t, r); err != nil {
				t.Fatal(err)
			}
		}
		big := make([]byte, 1<<20)
		stuck := make(chan error, 1)
		go func() {
			for {
				if err := r.Send([]byte{0, 0}, big); err != nil {
					stuck <- err
					return
				}
			}
		}()
		// While the stalled peer's buffers fill, the healthy one keeps being served.
		for i := range 20 {
			if err := r.Send([]byte{1, 0}, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if f, err := recvT(t, healthy); err != nil || f[0][0] != byte(i) {
				t.Fatalf("healthy got %v %v", f, err)
			}
		}
		select {
		case err := <-stuck:
			if !errors.Is(err, ErrSendTimeout) {
				t.Fatalf("stalled send: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("send to the stalled peer never timed out")
		}
	})
}

func TestStaleIPCFileRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// Leave the file behind as a crashed process would.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal("stale file missing:", err)
	}
	s := mustListen(t, Pull, "ipc://"+path, Options{})
	if _, err := Listen(ctxT(t), Pull, "ipc://"+path, Options{}); err == nil {
		t.Fatal("binding over a live socket succeeded")
	}
	s.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left after close: %v", err)
	}
}

func TestXPubSeesSubscriptions(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		xp := mustListen(t, XPub, ep(), Options{})
		xs := mustDial(t, XSub, xp.Addr(), Options{})
		if err := xs.Send([]byte{1}); err != nil {
			t.Fatal(err)
		}
		f, err := recvT(t, xp)
		if err != nil || !bytes.Equal(f[0], []byte{1}) {
			t.Fatalf("xpub got %q %v", f, err)
		}
		if err := xp.Send([]byte("READY")); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, xs); err != nil || string(f[0]) != "READY" {
			t.Fatalf("xsub got %q %v", f, err)
		}
	})
}

func TestDialTimesOut(t *testing.T) {
	dir := t.TempDir()
	_, err := Dial(ctxT(t), Dealer, "ipc://"+filepath.Join(dir, "nobody"), Options{DialTimeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("dial to nothing succeeded")
	}
}

func TestRecvCommandNotSurfaced(t *testing.T) {
	// A raw peer that sends a PING command then a message: only the message
	// surfaces and the PING gets a PONG.
	r := mustListen(t, Router, "tcp://127.0.0.1:0", Options{})
	nc, err := net.DialTimeout("tcp", r.Addr()[len("tcp://"):], testwait.Deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := handshake(nc, Dealer, []byte{5, 0}, false, Options{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	ping := []byte{4, 'P', 'I', 'N', 'G', 0, 10, 'c', 't', 'x'}
	if err := c.write([][]byte{ping}, flagCommand, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.write([][]byte{[]byte("data")}, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	f, err := recvT(t, r)
	if err != nil || len(f) != 2 || string(f[1]) != "data" {
		t.Fatalf("got %q %v", f, err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(testwait.Deadline))
	flag, got, err := readRawFrame(c)
	if err != nil || flag != flagCommand || string(got) != "\x04PONGctx" {
		t.Fatalf("want PONG, got %q flag=%#x err=%v", got, flag, err)
	}
}

// readRawFrame reads one frame, command or not, off a raw connection.
func readRawFrame(c *conn) (flag byte, body []byte, err error) {
	flag, err = c.br.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	var size uint64
	if flag&flagLong != 0 {
		var hdr [8]byte
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(hdr[:])
	} else {
		b, err := c.br.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		size = uint64(b)
	}
	body = make([]byte, size)
	_, err = io.ReadFull(c.br, body)
	return flag, body, err
}
