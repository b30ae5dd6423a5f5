package e2e

// The standing attack suite, client-protocol side: malformed msgpack,
// frames past the size bound, deep nesting, huge request ids, negative call ids and
// clients that vanish mid-request, each against a serve process with a
// well-behaved msgpack client beside it that must lose nothing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// msgClient is one DEALER on the client protocol, reading on its own goroutine.
type msgClient struct {
	t    *testing.T
	sock transport.Socket
	in   chan [][]byte
	done chan struct{}
}

func dialClient(t *testing.T, addr, id string) *msgClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock, err := transport.Dial(ctx, transport.Dealer, addr, transport.Options{Identity: []byte(id), SendTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &msgClient{t: t, sock: sock, in: make(chan [][]byte, 4096), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			m, err := sock.Recv()
			if err != nil {
				if errors.Is(err, transport.ErrClosed) {
					return
				}
				continue // a peer event: the server dropped us; the DEALER reconnects
			}
			select {
			case c.in <- m:
			default:
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *msgClient) close() {
	c.sock.Close()
	testwait.Recv(c.t, c.done, "the client's receive loop to end")
}

func addBody(t *testing.T, id string, maxTokens int64) [][]byte {
	t.Helper()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(maxTokens)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2}, Sampling: &sp})
	if err != nil {
		t.Fatal(err)
	}
	return append([][]byte{{wire.RequestAdd}, body}, aux...)
}

// run sends n ADDs of maxTokens tokens and waits until every one finished with all
// its tokens; it returns how many did not.
func (c *msgClient) run(t *testing.T, prefix string, n int, maxTokens int64) (failed int) {
	t.Helper()
	for i := range n {
		if err := c.sock.Send(addBody(t, fmt.Sprintf("%s-%d", prefix, i), maxTokens)...); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	toks := map[string]int64{}
	finished := 0
	deadline := time.After(30 * time.Second)
	for finished < n {
		select {
		case m := <-c.in:
			if len(m[0]) > 0 && m[0][0]&0xf0 == 0x80 {
				var e map[string]any
				_ = msgpack.Unmarshal(m[0], &e)
				t.Errorf("well-behaved client got an error: %v", e)
				continue
			}
			var o wire.EngineCoreOutputs
			if err := wire.DecodeOutputs(m, &o); err != nil {
				t.Errorf("undecodable outputs: %v", err)
				continue
			}
			for _, out := range o.Outputs {
				toks[out.RequestID] += int64(len(out.NewTokenIDs))
				if out.Finished() {
					finished++
				}
			}
		case <-deadline:
			t.Errorf("%d of %d requests finished", finished, n)
			return n - finished
		}
	}
	for id, k := range toks {
		if k != maxTokens {
			t.Errorf("%s: %d tokens, want %d", id, k, maxTokens)
			failed++
		}
	}
	return failed
}

// clientTarget starts serve and a well-behaved msgpack client.
func clientTarget(t *testing.T, args ...string) (*target, *msgClient) {
	t.Helper()
	tg := startTarget(t, args...)
	good := dialClient(t, tg.client, "good")
	if f := good.run(t, "warm", 4, 3); f > 0 {
		t.Fatalf("warm-up: %d failed", f)
	}
	tg.base = sampleResources(t, tg.pid, tg.url("/metrics"))
	return tg, good
}

// alongside runs the well-behaved msgpack client while attack runs.
func alongside(t *testing.T, good *msgClient, name string, attack func()) {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- good.run(t, name, 50, 5) }()
	attack()
	if f := testwait.Recv(t, done, "the well-behaved client's requests during the attack"); f > 0 {
		t.Errorf("during the attack %d of 50 well-behaved msgpack requests failed", f)
	}
}

// Malformed msgpack of every kind: random bytes, unknown type bytes, truncated and
// mistyped ADDs, deep nesting (in the ADD's untyped fields and in UTILITY args,
// which were decoded by a recursive decoder without a bound), request ids of
// 200 KiB, negative call ids. Each is answered with an error; the process lives.
func TestAttackClientMalformed(t *testing.T) {
	tg, good := clientTarget(t)
	bad := dialClient(t, tg.client, "bad")
	add := addBody(t, "x", 3)
	deep := append(bytes.Repeat([]byte{0x91}, 1<<20), 0xc0)
	util := func(callID any, method string, args []byte) [][]byte {
		var b bytes.Buffer
		enc := msgpack.NewEncoder(&b)
		_ = enc.EncodeArrayLen(4)
		_ = enc.EncodeInt(0)
		_ = enc.Encode(callID)
		_ = enc.EncodeString(method)
		b.Write(args)
		return [][]byte{{wire.RequestUtility}, b.Bytes()}
	}
	msgs := [][][]byte{
		{{wire.RequestAdd}, []byte("\xde\xad\xbe\xef")},
		{{0x07}, []byte{0x90}},
		{{wire.RequestAdd, 0}, []byte{0x90}},
		{{wire.RequestAdd}, add[1][:len(add[1])/2]},
		{{wire.RequestAbort}, []byte{0x91, 0x07}},
		{{wire.RequestAdd}, deep},
		util(int64(-1), "is_sleeping", []byte{0x90}),
		util(uint64(5), "collective_rpc", deep),
		addBody(t, strings.Repeat("i", 200<<10), 3),
	}
	const rounds = 20
	sent := 0
	alongside(t, good, "malformed", func() {
		for range rounds {
			for _, m := range msgs {
				if err := bad.sock.Send(m...); err != nil {
					t.Fatalf("send: %v", err)
				}
				sent++
			}
		}
	})
	answered := 0
	deadline := time.After(20 * time.Second)
	for answered < sent {
		select {
		case m := <-bad.in:
			answered++
			if len(m[0]) > 64<<10 {
				t.Errorf("an answer of %d bytes (an echoed id?)", len(m[0]))
			}
		case <-deadline:
			t.Fatalf("%d of %d malformed messages answered", answered, sent)
		}
	}
	tg.finish(t, "client-malformed", sent, 0, 96, 8)
}

// Frames past --client-max-frame-bytes: three clients each sending 64 MiB (the
// transport accepted 256 MiB frames and 1 GiB messages; three clients sending
// 1 GB each took RSS to 3.1 GB and kept it) are disconnected before the frame is
// read; RSS stays near the baseline.
func TestAttackClientHugeFrames(t *testing.T) {
	tg, good := clientTarget(t)
	huge := make([]byte, 64<<20)
	sent := 0
	alongside(t, good, "huge", func() {
		var wg sync.WaitGroup
		for i := range 3 {
			c := dialClient(t, tg.client, fmt.Sprintf("huge-%d", i))
			wg.Add(1)
			sent++
			go func() {
				defer wg.Done()
				_ = c.sock.Send([]byte{wire.RequestAdd}, huge) // fails once the server hangs up
			}()
		}
		testwait.Wait(t, &wg, "the sends of the huge frames")
	})
	peak := sampleResources(t, tg.pid, "")
	if peak.RSS > tg.base.RSS+rssSlack(96) {
		t.Errorf("RSS %d MiB after three 64 MiB frames; baseline %d MiB", peak.RSS>>20, tg.base.RSS>>20)
	}
	tg.finish(t, "client-huge-frames", sent, 0, 96, 8)
}

// Clients that vanish with requests in flight: their requests are aborted, nothing
// stays in flight, goroutines and fds come back.
func TestAttackClientVanish(t *testing.T) {
	tg, good := clientTarget(t)
	const clients, each = 40, 5
	alongside(t, good, "vanish", func() {
		for i := range clients {
			c := dialClient(t, tg.client, fmt.Sprintf("gone-%d", i))
			for j := range each {
				if err := c.sock.Send(addBody(t, fmt.Sprintf("r%d", j), 5000)...); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-c.in: // the first output: its requests are running
			case <-time.After(10 * time.Second):
				t.Fatal("no output for a vanishing client")
			}
			c.close()
		}
	})
	eventually(t, 15*time.Second, "the vanished clients' requests aborted", func() bool {
		for _, e := range tg.engines(t) {
			if e.InFlight != 0 {
				return false
			}
		}
		return true
	})
	tg.finish(t, "client-vanish", clients*each, 0, 64, 8)
}

// bigAdd is an ADD whose prompt is n one-byte token ids.
func bigAdd(t *testing.T, id string, n int) [][]byte {
	t.Helper()
	prompt := make([]int64, n)
	for i := range prompt {
		prompt[i] = 7
	}
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: prompt, Sampling: &sp})
	if err != nil {
		t.Fatal(err)
	}
	return append([][]byte{{wire.RequestAdd}, body}, aux...)
}

// Big valid ADDs just under the 8 MiB message bound, three clients at once: 7 M
// one-byte ids are refused from the raw length before decoding (decoding made 8
// bytes of each, 120 MB for a 15 MiB frame, and 60 such frames from one client took
// RSS to 1.4 GB), 1 M ids (the limit) are decoded and refused for the context;
// the receive queue holds a few messages, so RSS stays bounded.
func TestAttackClientBigAdds(t *testing.T) {
	tg, good := clientTarget(t)
	over, atLimit := bigAdd(t, "over", 7<<20), bigAdd(t, "limit", 1<<20)
	const clients, each = 3, 12
	peak := tg.base
	alongside(t, good, "big", func() {
		var wg sync.WaitGroup
		for i := range clients {
			c := dialClient(t, tg.client, fmt.Sprintf("big-%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range each {
					m := over
					if j%4 == 0 {
						m = atLimit
					}
					if err := c.sock.Send(m...); err != nil {
						t.Errorf("send: %v", err)
						return
					}
				}
				for range each {
					select {
					case m := <-c.in:
						if len(m[0]) == 0 || m[0][0]&0xf0 != 0x80 {
							t.Errorf("a big ADD was not refused")
						}
					case <-time.After(20 * time.Second):
						t.Errorf("a big ADD was not answered")
						return
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		deadline := time.After(testwait.Deadline)
		for {
			select {
			case <-done:
				return
			case <-deadline:
				t.Fatalf("waited %v for the big-ADD clients", testwait.Deadline)
			case <-time.After(50 * time.Millisecond):
				if r := sampleResources(t, tg.pid, ""); r.RSS > peak.RSS {
					peak = r
				}
			}
		}
	})
	t.Logf("peak during the attack: %v", peak)
	if peak.RSS > tg.base.RSS+rssSlack(256) {
		t.Errorf("RSS peaked at %d MiB (baseline %d MiB)", peak.RSS>>20, tg.base.RSS>>20)
	}
	tg.finish(t, "client-big-adds", clients*each, 0, 192, 8)
}

// Idle TCP connections to the client port far past --client-max-connections
// (lowered to 100): the rest are closed as they are accepted, so the server's fds
// stay near the cap; clients already connected are served throughout.
func TestAttackClientIdleConnections(t *testing.T) {
	const capConns, n = 100, 1000
	tg, good := clientTarget(t, "--client-max-connections", fmt.Sprint(capConns))
	addr := strings.TrimPrefix(tg.client, "tcp://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	peak := 0
	alongside(t, good, "client-idle", func() {
		for i := range n {
			c, err := net.DialTimeout("tcp", addr, testwait.Deadline)
			if err != nil {
				t.Fatalf("dial %d: %v", i, err)
			}
			conns = append(conns, c)
			if i%100 == 99 {
				peak = max(peak, sampleResources(t, tg.pid, "").FDs)
			}
		}
	})
	if limit := tg.base.FDs + capConns + 16; peak > limit {
		t.Errorf("fds peaked at %d with %d idle connections; want at most %d", peak, n, limit)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	tg.finish(t, "client-idle-connections", n, 0, 64, 8)
}
