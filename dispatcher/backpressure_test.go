package dispatcher

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/wire"
)

// clientSender is a fakeSender that also offers SendFrom, recording the
// client key and context of each ADD; busy ranks answer like a queue that
// stayed full until the context ended.
type clientSender struct {
	*fakeSender
	mu      sync.Mutex
	clients []uint64
	ctxs    []context.Context
	busy    map[int]bool
}

var errBusy = errors.New("send queue full")

func (c *clientSender) SendFrom(ctx context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	c.mu.Lock()
	c.clients = append(c.clients, client)
	c.ctxs = append(c.ctxs, ctx)
	busy := c.busy[rank]
	c.mu.Unlock()
	if busy {
		wire.PutBuffer(body)
		return errBusy
	}
	return c.Send(rank, typ, body, aux)
}

func newClientHarness(t *testing.T, ranks ...int) (*Dispatcher, *clientSender) {
	return newClientHarnessWith(t, Config{}, ranks...)
}

func newClientHarnessWith(t *testing.T, cfg Config, ranks ...int) (*Dispatcher, *clientSender) {
	t.Helper()
	cs := &clientSender{fakeSender: newFakeSender(t), busy: map[int]bool{}}
	cfg.Registerer = prometheus.NewRegistry()
	d, err := New(cfg, cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, r := range ranks {
		d.EngineUp(r)
	}
	return d, cs
}

// TestAddsCarryClientKey: ADDs go through SendFrom with the submitter's
// context and client key (WithClient), or a key of their own, so the
// frontend can share a full queue fairly instead of failing requests.
func TestAddsCarryClientKey(t *testing.T) {
	d, cs := newClientHarness(t, 0)
	ctx := WithClient(context.Background(), 42)
	if _, err := d.SubmitFuncContext(ctx, mkReq("a"), func(int, *wire.EngineCoreOutput, error) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Submit(context.Background(), mkReq("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Submit(context.Background(), mkReq("c")); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.clients) != 3 || cs.clients[0] != 42 || cs.ctxs[0] != ctx {
		t.Fatalf("clients %v", cs.clients)
	}
	if cs.clients[1]>>63 != 1 || cs.clients[2]>>63 != 1 || cs.clients[1] == cs.clients[2] {
		t.Fatalf("anonymous requests share a key or collide with WithClient keys: %x %x", cs.clients[1], cs.clients[2])
	}
}

// TestBusyRankTriesAnother: an ADD that could not get into a busy engine's
// queue goes to another rank (nothing was sent); once the caller's context
// is over, no other rank is tried.
func TestBusyRankTriesAnother(t *testing.T) {
	d, cs := newClientHarness(t, 0, 1)
	cs.mu.Lock()
	cs.busy[0] = true
	cs.mu.Unlock()
	for i := range 4 {
		s, err := d.Submit(context.Background(), mkReq(string(rune('a'+i))))
		if err != nil || s.Rank() != 1 {
			t.Fatalf("submit %d: rank %v err %v", i, s, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs.mu.Lock()
	cs.busy[1] = true
	n := len(cs.clients)
	cs.mu.Unlock()
	if _, err := d.SubmitFuncContext(ctx, mkReq("late"), func(int, *wire.EngineCoreOutput, error) {}); !errors.Is(err, errBusy) {
		t.Fatalf("all busy, caller gone: %v", err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if tries := len(cs.clients) - n; tries != 1 {
		t.Fatalf("%d ranks tried after the caller gave up, want 1", tries)
	}
}

// Anonymous client keys have their own counter: taking them from the
// policy's sequence made round-robin pick the same rank every time.
func TestRoundRobinWithClientSender(t *testing.T) {
	d, _ := newClientHarnessWith(t, Config{Policy: PolicyRoundRobin}, 0, 1)
	counts := map[int]int{}
	for _, id := range []string{"a", "b", "c", "d"} {
		s, err := d.Submit(context.Background(), mkReq(id))
		if err != nil {
			t.Fatal(err)
		}
		counts[s.Rank()]++
	}
	if counts[0] != 2 || counts[1] != 2 {
		t.Fatalf("round-robin over 2 ranks: %v", counts)
	}
}
