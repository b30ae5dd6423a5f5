package frontend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard-llm/switchyard/internal/memtransport"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// The stuck-engine watchdog under fake time, step by step: rank 0 stops reading, so
// after its receive queue is full its writer's socket write stays pending; Send then
// refuses once the queue is full (without blocking); rank 1 is served while rank 0's
// write is pending; exactly one watchdog tick after StuckAfter rank 0 is marked Stuck
// (its socket is closed, which ends the pending write) and only rank 0 goes down.
func TestStuckEngineIsolatedSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memtransport.New()
		rec := newRecorder()
		cfg := testConfig(t, "tcp", 2)
		cfg.Network = mem
		cfg.SendQueue = 4
		cfg.StuckAfter = 2 * time.Second
		f := startFrontend(t, cfg, rec)
		c0 := mockConfig(f.HandshakeAddress(), 0, 2)
		c0.Network = mem
		c0.Faults.StallAfterSteps = 1
		startMock(t, c0)
		c1 := mockConfig(f.HandshakeAddress(), 1, 2)
		c1.Network = mem
		startMock(t, c1)
		waitReady(t, f, 2)

		sendAll(t, f, 0, 1, 1000, "s") // gets the engine stepping...
		rec.waitFor(t, "rank 0 stepped", func() bool { return rec.stats[0] >= 1 })
		time.Sleep(c0.StepInterval) // ...and its next step, one fake step interval on, stalls it
		synctest.Wait()

		// Feed rank 0 until its writer is blocked in a socket write: the engine's
		// receive buffers are full. synctest.Wait lets the writer go as far as it can.
		e0 := f.table.Load().get(0)
		blocked := false
		for i := 0; i < 64 && !blocked; i++ {
			if err := f.Send(0, wire.RequestAdd, addBody(t, fmt.Sprintf("fill-%d", i), 1000, nil), nil); err != nil {
				t.Fatalf("send %d to rank 0 before its writer blocked: %v", i, err)
			}
			synctest.Wait()
			blocked = e0.pendingSince.Load() != 0
		}
		if !blocked {
			t.Fatal("rank 0's writer never blocked although the engine stopped reading")
		}
		pendingAt := time.Now()
		if got := e0.pendingSince.Load(); got != pendingAt.UnixNano() {
			t.Fatalf("write pending since %v, want %v", time.Unix(0, got), pendingAt)
		}

		// The queue takes SendQueue more; then an ADD waits for room (a full
		// queue is backpressure) until its context ends.
		for i := range cfg.SendQueue {
			if err := f.Send(0, wire.RequestAdd, addBody(t, fmt.Sprintf("queued-%d", i), 1000, nil), nil); err != nil {
				t.Fatalf("queueing %d: %v", i, err)
			}
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		err := f.SendFrom(wctx, 7, 0, wire.RequestAdd, addBody(t, "waited", 1000, nil), nil)
		wcancel()
		var full *QueueFullError
		if !errors.As(err, &full) || errIs[*EngineDeadError](err) || full.Rank != 0 || full.Queued != cfg.SendQueue || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("send into rank 0's full queue: %v", err)
		}

		// Rank 1 is served while rank 0's write is pending.
		ok := sendAll(t, f, 1, 3, 5, "s")
		rec.waitFor(t, "rank 1 served", func() bool { return rec.allFinished(ok) })
		if d := time.Since(pendingAt); d > cfg.StuckAfter {
			t.Fatalf("rank 1 took %v", d)
		}
		rec.mu.Lock()
		if len(rec.downs[0]) != 0 || f.Engines()[0].State != Ready {
			t.Fatalf("rank 0 down before StuckAfter: %v %v", rec.downs[0], f.Engines()[0].State)
		}
		rec.mu.Unlock()

		// The watchdog: the first tick after StuckAfter marks rank 0 Stuck.
		rec.waitFor(t, "rank 0 stuck", func() bool { return len(rec.downs[0]) == 1 })
		elapsed := time.Since(pendingAt)
		if elapsed <= cfg.StuckAfter || elapsed > cfg.StuckAfter+f.tickInterval() {
			t.Fatalf("rank 0 marked down %v after its write became pending (StuckAfter %v, tick %v)", elapsed, cfg.StuckAfter, f.tickInterval())
		}
		rec.mu.Lock()
		down := rec.downs[0][0]
		downs1 := len(rec.downs[1])
		rec.mu.Unlock()
		var dead *EngineDeadError
		var stuck *EngineStuckError
		if !errors.As(down, &dead) || dead.Rank != 0 || !errors.As(down, &stuck) || stuck.Pending != elapsed || stuck.Queued != cfg.SendQueue {
			t.Fatalf("rank 0 down with %v, want stuck for %v with %d queued", down, elapsed, cfg.SendQueue)
		}
		if downs1 != 0 {
			t.Fatalf("rank 1 down: %d", downs1)
		}
		synctest.Wait() // the closed socket ended the pending write; the queue is dropped
		if e0.pendingSince.Load() != 0 || e0.sendq.queued() != 0 {
			t.Fatalf("rank 0 writer still pending (%d) with %d queued", e0.pendingSince.Load(), e0.sendq.queued())
		}
		if info := f.Engines()[0]; info.State != Stuck {
			t.Fatalf("rank 0 state %v", info.State)
		}
		if err := f.Send(0, wire.RequestAbort, wire.AppendAbort(wire.GetBuffer(), []string{"s-r0-0"}), nil); !errors.As(err, &dead) || !errIs[*EngineStuckError](err) {
			t.Fatalf("send to stuck engine: %v", err)
		}
		ok = sendAll(t, f, 1, 2, 3, "after")
		rec.waitFor(t, "rank 1 still served", func() bool { return rec.allFinished(ok) })
	})
}

// The same over real sockets: rank 0 is an engine that joins, registers and then
// never reads its input connection again. Its receive buffer is shrunk to the
// minimum and it has no application-level queue, so everything the frontend writes
// stays in the frontend's own send buffer, which is at most tcp_wmem's maximum
// (unix sockets: wmem_default). The test queues twice that in one go (the queue is
// large enough that nothing is refused), so the writer must block, whatever the load:
// rank 0 ends Stuck and only rank 0 goes down, while rank 1 keeps serving.
func TestStuckEngineIsolated(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		const frame = 1 << 20
		n := int(2*maxSendBuffer()/frame) + 2
		rec := newRecorder()
		cfg := testConfig(t, tr, 2)
		cfg.StuckAfter = time.Second
		cfg.SendQueue = n
		f := startFrontend(t, cfg, rec)
		startStalledEngine(t, f.HandshakeAddress(), 0, 2)
		startMock(t, mockConfig(f.HandshakeAddress(), 1, 2))
		waitReady(t, f, 2)

		zeros := make([]byte, frame) // never decoded: the engine reads none of it
		for i := range n {
			if err := f.Send(0, wire.RequestAdd, append(wire.GetBuffer(), zeros...), nil); err != nil {
				t.Fatalf("queueing %d of %d: %v", i, n, err)
			}
		}
		ok := sendAll(t, f, 1, 3, 5, "s")
		rec.waitFor(t, "rank 0 stuck, rank 1 served", func() bool { return len(rec.downs[0]) == 1 && rec.allFinished(ok) })
		rec.mu.Lock()
		down := rec.downs[0][0]
		downs1 := len(rec.downs[1])
		rec.mu.Unlock()
		// The watchdog (Pending > StuckAfter), or on a starved machine the transport's
		// write deadline behind it (Pending = 2 x StuckAfter): both mean stuck.
		var stuck *EngineStuckError
		if !errIs[*EngineDeadError](down) || !errors.As(down, &stuck) || stuck.Rank != 0 || stuck.Pending < cfg.StuckAfter {
			t.Fatalf("rank 0 down with %v", down)
		}
		if downs1 != 0 {
			t.Fatalf("rank 1 down %d times", downs1)
		}
		if info := f.Engines()[0]; info.State != Stuck {
			t.Fatalf("rank 0 state %v", info.State)
		}
		if err := f.Send(0, wire.RequestAbort, wire.AppendAbort(wire.GetBuffer(), []string{"x"}), nil); !errIs[*EngineStuckError](err) {
			t.Fatalf("send to stuck engine: %v", err)
		}
		ok = sendAll(t, f, 1, 2, 3, "after")
		rec.waitFor(t, "rank 1 still served", func() bool { return rec.allFinished(ok) })
		if info := f.Engines()[1]; info.State != Ready {
			t.Fatalf("rank 1 state %v", info.State)
		}
	})
}

// maxSendBuffer bounds what the kernel buffers for a socket we never set SO_SNDBUF
// on: autotuned tcp up to tcp_wmem's maximum, unix sockets at wmem_default.
func maxSendBuffer() int64 {
	limit := int64(4 << 20) // Linux's default tcp_wmem maximum
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) == 3 {
			if v, err := strconv.ParseInt(fs[2], 10, 64); err == nil {
				limit = v
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_default"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			limit = max(limit, v)
		}
	}
	return limit
}

// startStalledEngine joins the frontend at hs as rank like a headless engine (HELLO,
// INIT, registration on its input, READY) and then never reads its input again. The
// input connection is a raw ZMTP DEALER with the smallest receive buffer the kernel
// allows, so the frontend's writes to it soon block. Closed at cleanup.
func startStalledEngine(t *testing.T, hs string, rank, dp int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := wire.IdentityOf(rank)
	opt := transport.Options{Identity: id[:]}
	h, err := transport.Dial(ctx, transport.Dealer, hs, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hello := wire.HandshakeStatus{Status: "HELLO", Headless: true}
	if err := h.Send(wire.AppendHandshakeStatus(nil, &hello)); err != nil {
		t.Fatal(err)
	}
	frames, err := recvBefore(ctx, h)
	if err != nil {
		t.Fatalf("waiting for INIT: %v", err)
	}
	init, err := wire.DecodeInit(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	out, err := transport.Dial(ctx, transport.Push, init.Addresses.Outputs[0], opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	in, err := dialStalledDealer(ctx, init.Addresses.Inputs[0], id[:])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	reg := wire.ReadyResponse{
		MaxModelLen:      wire.SomeInt(8192),
		DataParallelSize: wire.SomeInt(int64(dp)),
		DataParallelRank: wire.SomeInt(int64(rank)),
	}
	// A v0.21 engine: a registration map without vllm_version places it at once.
	v021 := wire.BuiltinLayout("v0.21")
	if err := writeZMTP(in, 0, wire.AppendRegistration(nil, v021, &reg)); err != nil {
		t.Fatal(err)
	}
	ready := wire.HandshakeStatus{Status: "READY", Headless: true}
	if err := h.Send(wire.AppendReady(nil, v021, &ready)); err != nil {
		t.Fatal(err)
	}
}

// recvBefore is Recv under ctx's deadline.
func recvBefore(ctx context.Context, s transport.Socket) ([][]byte, error) {
	ch := make(chan recvResult, 1)
	go func() { f, err := s.Recv(); ch <- recvResult{f, err} }()
	select {
	case r := <-ch:
		return r.frames, r.err
	case <-ctx.Done():
		s.Close() // ends the Recv above
		<-ch
		return nil, ctx.Err()
	}
}

// dialStalledDealer connects to a tcp:// or ipc:// ROUTER with SO_RCVBUF at its
// minimum (set before connecting, which also turns off receive autotuning) and runs
// the ZMTP 3.0 NULL handshake as a DEALER with identity id.
func dialStalledDealer(ctx context.Context, endpoint string, id []byte) (net.Conn, error) {
	network, addr, ok := strings.Cut(endpoint, "://")
	if !ok {
		return nil, fmt.Errorf("bad endpoint %q", endpoint)
	}
	if network == "ipc" {
		network = "unix"
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	greeting := make([]byte, 64) // signature, version 3.0, mechanism NULL, as-server 0
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	ready := append([]byte{5}, "READY"...)
	for _, p := range [][2]string{{"Socket-Type", "DEALER"}, {"Identity", string(id)}} {
		ready = append(ready, byte(len(p[0])))
		ready = append(ready, p[0]...)
		ready = binary.BigEndian.AppendUint32(ready, uint32(len(p[1])))
		ready = append(ready, p[1]...)
	}
	_, err = nc.Write(greeting)
	if err == nil {
		err = writeZMTP(nc, 0x04, ready)
	}
	if err == nil {
		_, err = io.ReadFull(nc, make([]byte, 64)) // the ROUTER's greeting
	}
	if err == nil {
		err = readZMTPCommand(nc, "READY")
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("zmtp handshake with %s: %w", endpoint, err)
	}
	nc.SetDeadline(time.Time{})
	return nc, nil
}

// writeZMTP writes one single-frame message (flag 0) or command (flag 0x04).
func writeZMTP(w io.Writer, flag byte, body []byte) error {
	hdr := []byte{flag, byte(len(body))}
	if len(body) > 255 {
		hdr = binary.BigEndian.AppendUint64([]byte{flag | 0x02}, uint64(len(body)))
	}
	_, err := w.Write(append(hdr, body...))
	return err
}

// readZMTPCommand reads one command frame and checks its name.
func readZMTPCommand(r io.Reader, name string) error {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:2]); err != nil {
		return err
	}
	size := uint64(hdr[1])
	if hdr[0]&0x02 != 0 {
		if _, err := io.ReadFull(r, hdr[2:9]); err != nil {
			return err
		}
		size = binary.BigEndian.Uint64(hdr[1:9])
	}
	if hdr[0]&0x04 == 0 || size > 1<<16 {
		return fmt.Errorf("want a %s command, got flags %#x size %d", name, hdr[0], size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if len(body) < 1+len(name) || int(body[0]) != len(name) || string(body[1:1+len(name)]) != name {
		return fmt.Errorf("want a %s command, got %q", name, body)
	}
	return nil
}
