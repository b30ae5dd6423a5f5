package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// rawPeer connects to a socket's endpoint and completes the ZMTP greeting, leaving
// the framing to the test.
func rawPeer(t *testing.T, kind Kind, endpoint string, id []byte) *conn {
	t.Helper()
	network, address, err := splitEndpoint(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout(network, address, testwait.Deadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c, err := handshake(nc, kind, id, false, Options{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	// The test's own reads and writes of raw frames fail rather than hang.
	_ = nc.SetDeadline(time.Now().Add(testwait.Deadline))
	return c
}

// libzmq with HEARTBEAT_IVL writes a PING between the frames of a multipart message
// when its timer fires mid-message. The PING is answered and the message arrives
// whole; before, the connection was dropped ("command inside a multipart message").
func TestPingBetweenFramesOfAMessage(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		pull := mustListen(t, Pull, ep(), Options{})
		c := rawPeer(t, Push, pull.Addr(), nil)
		big := bytes.Repeat([]byte{9}, 70<<10)
		var wire []byte
		wire = appendHeader(wire, []byte("head"), true, 0)
		wire = append(wire, "head"...)
		ping := []byte{4, 'P', 'I', 'N', 'G', 0, 10, 'h', 'b'}
		wire = appendHeader(wire, ping, false, flagCommand)
		wire = append(wire, ping...)
		wire = appendHeader(wire, big, true, 0)
		wire = append(wire, big...)
		wire = appendHeader(wire, ping, false, flagCommand)
		wire = append(wire, ping...)
		wire = appendHeader(wire, []byte("tail"), false, 0)
		wire = append(wire, "tail"...)
		if _, err := c.nc.Write(wire); err != nil {
			t.Fatal(err)
		}
		f, err := recvT(t, pull)
		if err != nil || len(f) != 3 || string(f[0]) != "head" || !bytes.Equal(f[1], big) || string(f[2]) != "tail" {
			t.Fatalf("got %d frames, err %v", len(f), err)
		}
		for range 2 {
			flag, got, err := readRawFrame(c)
			if err != nil || flag != flagCommand || string(got) != "\x04PONGhb" {
				t.Fatalf("want PONG, got %q flag %#x err %v", got, flag, err)
			}
		}
	})
}

// The same against libzmq itself: a pyzmq PUSH with 5 ms heartbeats sends 1.4 MiB
// multipart messages (aux frames of 300 B, 100 KiB and 1 MiB); every message arrives
// intact and in order and the PUSH never sees its connection drop.
func TestPythonPushHeartbeatsMidMessage(t *testing.T) {
	py := pytest.Find(t, "zmq")
	forEachTransport(t, func(t *testing.T, ep func() string) {
		pull := mustListen(t, Pull, ep(), Options{})
		const count = 150
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "testdata/py_push.py", pull.Addr(), fmt.Sprint(count))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sizes := []int{300, 100 << 10, 1 << 20}
		for i := 0; ; i++ {
			f, err := recvT(t, pull)
			if err != nil {
				stdin.Close()
				cmd.Wait()
				t.Fatalf("after %d messages: %v (python printed %q)", i, err, out.String())
			}
			if len(f) == 1 && string(f[0]) == "END" {
				if i != count {
					t.Fatalf("%d messages arrived, want %d", i, count)
				}
				stdin.Close()
				break
			}
			if len(f) != 4 || string(f[0][:4]) != "head" || binary.BigEndian.Uint32(f[0][4:]) != uint32(i) {
				t.Fatalf("message %d: %d frames, head %q", i, len(f), f[0])
			}
			for j, n := range sizes {
				if len(f[j+1]) != n || bytes.Count(f[j+1], []byte{byte(i + j)}) != n {
					t.Fatalf("message %d: aux frame %d (%d bytes) corrupted", i, j, len(f[j+1]))
				}
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(out.String()); got != "0" {
			t.Fatalf("the PUSH saw %s disconnects, want 0", got)
		}
	})
}

// A header claiming a 200 MiB frame costs memory only as the bytes arrive: a peer
// that sends 1,000 of them and stops makes the reader allocate well under 1 MiB
// (it used to allocate all 200 MiB up front), one that sends 100 KiB makes it
// allocate at most growFactor times that.
func TestFrameBodyGrowsAsBytesArrive(t *testing.T) {
	var in []byte
	in = append(in, flagLong)
	in = binary.BigEndian.AppendUint64(in, 200<<20)
	in = append(in, make([]byte, 1000)...)
	o := Options{}.withDefaults()
	c := &conn{br: bufio.NewReaderSize(bytes.NewReader(in), readBufSize), maxFrame: uint64(o.MaxFrameSize), maxMsg: uint64(o.MaxMessageSize)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.readMsg()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want unexpected EOF, got %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("allocated %d bytes for 1,000 received", n)
	}
	in = append(in[:9], make([]byte, 100<<10)...)
	c.br = bufio.NewReaderSize(bytes.NewReader(in), readBufSize)
	runtime.ReadMemStats(&before)
	_, err = c.readMsg()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want unexpected EOF, got %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > growFactor*100<<10+readBufSize {
		t.Fatalf("allocated %d bytes for 100 KiB received", n)
	}
	// A frame that does arrive is whole, across several growth steps.
	big := make([]byte, growFactor*growFactor*readBufSize+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	in = appendHeader(nil, big, false, 0)
	in = append(in, big...)
	c.br = bufio.NewReaderSize(bytes.NewReader(in), readBufSize)
	if f, err := c.readMsg(); err != nil || len(f) != 1 || !bytes.Equal(f[0], big) {
		t.Fatalf("big frame: %v", err)
	}
}

// Options.MaxMessageSize bounds a message's frames together: each frame is under
// MaxFrameSize but the third one crosses the message limit, and the peer is dropped
// with a *MessageTooLargeError (matching ErrFrameTooLarge as well).
func TestMaxMessageSize(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		p := mustListen(t, Pull, ep(), Options{MaxFrameSize: 1024, MaxMessageSize: 2048})
		push := mustDial(t, Push, p.Addr(), Options{})
		frame := make([]byte, 1000)
		if err := push.Send(frame, frame); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, p); err != nil || len(f) != 2 {
			t.Fatalf("message within the limit: %v", err)
		}
		if err := push.Send(frame, frame, frame); err != nil {
			t.Fatal(err)
		}
		_, err := recvT(t, p)
		var tooLarge *MessageTooLargeError
		if !errors.Is(err, ErrPeerLeft) || !errors.As(err, &tooLarge) || !errors.Is(err, ErrMessageTooLarge) || !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("want peer left by message too large, got %v", err)
		}
		if tooLarge.Size != 3000 || tooLarge.Max != 2048 {
			t.Fatalf("error %+v", tooLarge)
		}
	})
}

// A ROUTER with PeerEvents reports a departed peer before it lets the same identity
// in again. Here the departure cannot be queued yet (the receive queue is full), so
// a reconnect with that identity is held, unrouted, until it is; its first message
// then follows the ErrPeerLeft. Before, the identity was free as soon as the
// connection closed, and a rejoining engine's registration could be queued ahead of
// the old connection's departure.
func TestPeerLeftReportedBeforeIdentityReused(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{PeerEvents: true, RecvQueue: 1})
		old, err := Dial(ctxT(t), Dealer, r.Addr(), Options{Identity: []byte{7, 0}})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Send([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil { // the router knows the peer
			t.Fatal(err)
		}
		// "old" fills the queue, so the departure that follows cannot be queued.
		if err := old.Send([]byte("old")); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := r.(*socket)
		// Wait until the router has seen the connection close. (Probing with a Send
		// would not do: a write to the closed peer fails and closes the connection
		// before "old" is read, and then nothing holds the queue.)
		waitState(t, "departed peer unrouted", func() bool { return !routed(r, []byte{7, 0}) })
		// The reconnect's handshake completes only once it is admitted (the
		// router holds its READY), so it dials on its own goroutine.
		dialed := make(chan Socket, 1)
		go func() {
			again, err := Dial(ctxT(t), Dealer, r.Addr(), Options{Identity: []byte{7, 0}})
			if err != nil {
				dialed <- nil
				return
			}
			again.Send([]byte("rejoin"))
			dialed <- again
		}()
		waitState(t, "reconnect held", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.joinsWaiting == 1
		})
		if err := r.Send([]byte{7, 0}, []byte("x")); !errors.Is(err, ErrNoPeer) {
			t.Fatalf("send to a held reconnect: %v, want ErrNoPeer", err)
		}
		if f, err := recvT(t, r); err != nil || string(f[1]) != "old" {
			t.Fatalf("first: %q %v", f, err)
		}
		if _, err := recvT(t, r); !errors.Is(err, ErrPeerLeft) {
			t.Fatalf("second: want the old connection's departure, got %v", err)
		}
		// This Recv releases the identity: the departure was handled.
		if f, err := recvT(t, r); err != nil || string(f[1]) != "rejoin" {
			t.Fatalf("third: %q %v", f, err)
		}
		again := testwait.Recv(t, dialed, "the reconnecting dealer's dial")
		if again == nil {
			t.Fatal("reconnect failed")
		}
		t.Cleanup(func() { again.Close() })
		if err := r.Send([]byte{7, 0}, []byte("welcome")); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, again); err != nil || string(f[0]) != "welcome" {
			t.Fatalf("rejoined peer got %q %v", f, err)
		}
	})
}

// waitState polls internal state that no event announces, under a deadline.
func waitState(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// routed reports whether a ROUTER routes to id.
func routed(r Socket, id []byte) bool {
	s := r.(*socket)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byID[string(id)]
	return p != nil && !p.gone
}

// captureHandler counts log records by level.
type captureHandler struct {
	mu     sync.Mutex
	levels map[slog.Level]int
	msgs   []string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.levels[r.Level]++
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func (h *captureHandler) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.levels[l]
}

// libzmq retries a refused connection every 100 ms; the refusal is logged at Warn
// once per identity and interval, the rest at Debug.
func TestDuplicateIdentityWarningRateLimited(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		logs := &captureHandler{levels: map[slog.Level]int{}}
		r := mustListen(t, Router, ep(), Options{Logger: slog.New(logs)})
		first := mustDial(t, Dealer, r.Addr(), Options{Identity: []byte{2, 0}})
		if err := first.Send([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			// Refused before its handshake completes: the dial fails.
			if dup, err := Dial(ctxT(t), Dealer, r.Addr(), Options{Identity: []byte{2, 0}, PeerEvents: true}); err == nil {
				dup.Close()
				t.Fatal("duplicate identity admitted")
			}
		}
		if w, d := logs.count(slog.LevelWarn), logs.count(slog.LevelDebug); w != 1 || d != 4 {
			t.Fatalf("%d warnings and %d debug records for 5 refusals, want 1 and 4: %q", w, d, logs.msgs)
		}
	})
}

// XSUB keeps its subscriptions as a counted set, as libzmq does: a repeated
// subscription is counted, an unsubscribe that leaves a count is not forwarded, and
// a new peer is sent each live topic once. Before, every (un)subscription was kept
// and replayed, so the list grew forever.
func TestXSubSubscriptionSet(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		xs := mustListen(t, XSub, ep(), Options{})
		for _, m := range []string{"\x01a", "\x01b", "\x01a", "\x00a", "\x00b", "\x01c", "\x00zzz"} {
			if err := xs.Send([]byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		for range 1000 {
			xs.Send([]byte("\x01x"))
			xs.Send([]byte("\x00x"))
		}
		s := xs.(*socket)
		s.mu.Lock()
		var live []string
		for _, sub := range s.subs {
			live = append(live, fmt.Sprintf("%q*%d", sub.msg, sub.n))
		}
		s.mu.Unlock()
		if got := strings.Join(live, " "); got != `"\x01a"*1 "\x01c"*1` {
			t.Fatalf("subscriptions %s", got)
		}
		xp := mustDial(t, XPub, xs.Addr(), Options{})
		for _, want := range []string{"\x01a", "\x01c"} {
			if f, err := recvT(t, xp); err != nil || string(f[0]) != want {
				t.Fatalf("replayed %q %v, want %q", f, err, want)
			}
		}
	})
}

// A PUB/XPUB subscriber that stops reading delays nobody: it has its own queue and
// writer, and messages for it are dropped once its queue is full, while a healthy
// subscriber receives every message at once. Before, Send wrote to each subscriber
// in turn on the caller's goroutine, and blocked on the stalled one until its write
// deadline.
func TestXPubStalledSubscriberDoesNotBlockOthers(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		xp := mustListen(t, XPub, ep(), Options{SendHWM: 4, SendTimeout: time.Minute})
		stalled := mustDial(t, XSub, xp.Addr(), Options{RecvQueue: 1})
		healthy := mustDial(t, XSub, xp.Addr(), Options{})
		for _, s := range []Socket{stalled, healthy} {
			if err := s.Send([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := recvT(t, xp); err != nil { // the subscription is in
				t.Fatal(err)
			}
		}
		big := make([]byte, 512<<10)
		for i := range 100 { // 50 MiB: far more than the stalled peer's buffers
			binary.BigEndian.PutUint32(big, uint32(i))
			start := time.Now()
			if err := xp.Send(big); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("send %d took %v", i, d)
			}
			f, err := recvT(t, healthy)
			if err != nil || binary.BigEndian.Uint32(f[0]) != uint32(i) {
				t.Fatalf("healthy subscriber, message %d: %v", i, err)
			}
		}
		s := xp.(*socket)
		s.mu.Lock()
		dropped := s.dropped
		s.mu.Unlock()
		if dropped == 0 {
			t.Fatal("nothing dropped for the stalled subscriber")
		}
	})
}

// A peer that stops reading and floods PINGs cannot grow the write queue while a
// flush to it is blocked: one PONG waits at most (any traffic answers a heartbeat).
func TestPingFloodWhileStalledQueuesOnePong(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep func() string) {
		r := mustListen(t, Router, ep(), Options{SendTimeout: time.Minute})
		c := rawPeer(t, Dealer, r.Addr(), []byte{4, 0})
		hello := appendHeader(nil, []byte("hi"), false, 0)
		if _, err := c.nc.Write(append(hello, "hi"...)); err != nil {
			t.Fatal(err)
		}
		if _, err := recvT(t, r); err != nil {
			t.Fatal(err)
		}
		// Two senders to the peer, which never reads: one flushes a message larger
		// than any socket buffer, so its flush blocks until the peer leaves, and the
		// other queues behind it. Smaller messages in a loop would let a flush finish
		// between two sends, and a PING in that gap makes the reader the flusher.
		blocked := make(chan error, 2)
		for range 2 {
			go func() {
				if err := r.Send([]byte{4, 0}, make([]byte, 128<<20)); err != nil {
					blocked <- err
					return
				}
				blocked <- nil
			}()
		}
		s := r.(*socket)
		s.mu.Lock()
		pc := s.byID["\x04\x00"].c
		s.mu.Unlock()
		waitState(t, "a sender queued behind a blocked flush", func() bool {
			pc.wmu.Lock()
			defer pc.wmu.Unlock()
			return pc.flushing && len(pc.pending) > 0
		})
		ping := []byte{4, 'P', 'I', 'N', 'G', 0, 10}
		var flood []byte
		for range 10000 {
			flood = appendHeader(flood, ping, false, flagCommand)
			flood = append(flood, ping...)
		}
		flood = appendHeader(flood, []byte("after"), false, 0)
		flood = append(flood, "after"...)
		if _, err := c.nc.Write(flood); err != nil {
			t.Fatal(err)
		}
		if f, err := recvT(t, r); err != nil || string(f[1]) != "after" {
			t.Fatalf("got %q %v", f, err)
		}
		pc.wmu.Lock()
		pongs := 0
		for _, it := range pc.pending {
			if it.flag == flagCommand {
				pongs++
			}
		}
		pc.wmu.Unlock()
		if pongs > 1 {
			t.Fatalf("%d PONGs queued after 10,000 PINGs, want at most 1", pongs)
		}
		c.nc.Close()
		for range 2 {
			if err := testwait.Recv(t, blocked, "the blocked sends to fail after the peer left"); err == nil {
				t.Fatal("send to the departed peer succeeded")
			}
		}
	})
}
