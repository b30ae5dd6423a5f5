package mockengine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 15 * time.Second

func within[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// loadSeen records which ranks reported load to the coordinator.
type loadSeen chan int

func (l loadSeen) ObserveLoad(rank int, _, _ int64, _ float64) {
	select {
	case l <- rank:
	default: // the test only needs the first few
	}
}

// waveRig is an in-process coordinator, a minimal frontend (handshake ROUTER,
// input ROUTER, output PULL) and dp mock engines whose INIT carries the
// coordinator addresses.
type waveRig struct {
	node *coordinator.Node
	in   transport.Socket
	out  transport.Socket
	pubs chan wire.CoordinatorPublish
	load loadSeen
}

func newWaveRig(t *testing.T, endpoint func(string) string, dp int) *waveRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	rig := &waveRig{pubs: make(chan wire.CoordinatorPublish, 256), load: make(loadSeen, 64)}

	cfg := coordinator.DefaultConfig()
	cfg.InputAddress, cfg.OutputAddress, cfg.PublishAddress = endpoint("cin"), endpoint("cout"), endpoint("cpub")
	cfg.Engines, cfg.EnableWaves = dp, true
	cfg.PublishInterval, cfg.HeartbeatInterval, cfg.ReadyResend = 5*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	node, err := coordinator.NewNode(cfg, rig.load)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rig.node = node
	t.Cleanup(func() { node.Close() })

	listen := func(kind transport.Kind, ep string) transport.Socket {
		s, err := transport.Listen(ctx, kind, ep, transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	hs := listen(transport.Router, "tcp://127.0.0.1:0")
	rig.in = listen(transport.Router, endpoint("in"))
	rig.out = listen(transport.Pull, endpoint("out"))

	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for r := range dp {
		mc := mockengine.DefaultConfig()
		mc.HandshakeAddress = hs.Addr()
		mc.Rank, mc.DataParallelSize = r, dp
		mc.StepInterval = 2 * time.Millisecond
		wg.Go(func() {
			if err := mockengine.Run(runCtx, mc); err != nil {
				t.Errorf("engine %d: %v", r, err)
			}
		})
	}
	t.Cleanup(func() { stop(); testwait.Wait(t, &wg, "the mock engines to stop") })

	recv := func(s transport.Socket, what string) [][]byte {
		t.Helper()
		c := make(chan [][]byte, 1)
		go func() {
			f, err := s.Recv()
			if err != nil {
				f = nil
			}
			c <- f
		}()
		f := within(t, c, what)
		if f == nil {
			t.Fatalf("%s: socket closed", what)
		}
		return f
	}
	init := wire.AppendInit(nil, &wire.HandshakeInit{Addresses: wire.EngineZmqAddresses{
		Inputs: []string{rig.in.Addr()}, Outputs: []string{rig.out.Addr()},
		CoordinatorInput:  wire.SomeString(node.InputAddress()),
		CoordinatorOutput: wire.SomeString(node.OutputAddress()),
	}})
	// HELLOs and READYs interleave: an engine that got its INIT may be READY
	// before the next engine says HELLO. An engine sends its handshake READY
	// only after the coordinator's READY.
	for ready := 0; ready < dp; {
		f := recv(hs, "HELLO or READY")
		st, err := wire.DecodeHandshakeStatus(f[1])
		if err != nil {
			t.Fatal(err)
		}
		switch st.Status {
		case "HELLO":
			if err := hs.Send(f[0], init); err != nil {
				t.Fatalf("INIT to %x: %v", f[0], err)
			}
		case "READY":
			id, _ := wire.ParseIdentity(f[0])
			node.EngineReady(id.Rank())
			ready++
		default:
			t.Fatalf("handshake status %q", st.Status)
		}
	}
	for range dp {
		recv(rig.in, "registration")
	}

	front, err := transport.Dial(ctx, transport.XSub, node.PublishAddress(), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	front.Send([]byte{1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := front.Recv()
			if err != nil {
				return
			}
			if p, err := wire.DecodeCoordinatorPublish(f[0]); err == nil {
				select {
				case rig.pubs <- p:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { front.Close(); testwait.Recv(t, done, "the publish reader to end") })
	within(t, rig.pubs, "first publish")
	return rig
}

func (rig *waveRig) waitWave(t *testing.T, wave int64, running bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		p := within(t, rig.pubs, "publish")
		if p.CurrentWave == wave && p.EnginesRunning == running {
			return
		}
	}
	t.Fatalf("no publish of wave %d running=%v", wave, running)
}

// add sends an ADD stamped with wave to rank, as the dispatcher would.
func (rig *waveRig) add(t *testing.T, rank int, id string, wave int64) {
	t.Helper()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(3)
	body, _, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{
		RequestID: id, PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp, CurrentWave: wave,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.in.Send(wire.IdentityOf(rank).Bytes(), []byte{wire.RequestAdd}, body); err != nil {
		t.Fatal(err)
	}
}

// waitFinished reads the output PULL until id finishes.
func (rig *waveRig) waitFinished(t *testing.T, id string) {
	t.Helper()
	c := make(chan error, 1)
	go func() {
		var o wire.EngineCoreOutputs
		for {
			frames, err := rig.out.Recv()
			if errors.Is(err, transport.ErrPeerLeft) {
				continue
			}
			if err != nil {
				c <- err
				return
			}
			if err := wire.DecodeOutputs(frames, &o); err != nil {
				c <- err
				return
			}
			for _, out := range o.Outputs {
				if out.RequestID == id && out.Finished() {
					c <- nil
					return
				}
			}
		}
	}()
	if err := within(t, c, id+" finished"); err != nil {
		t.Fatal(err)
	}
}

// The mock engines pass the coordinator gate, report load, wake on
// START_DP_WAVE, report wave_complete (rank 0) and start_wave on a stale ADD.
func TestMockEngineWaves(t *testing.T) {
	for _, tr := range []string{"ipc", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			endpoint := func(string) string { return "tcp://127.0.0.1:0" }
			if tr == "ipc" {
				dir, err := os.MkdirTemp("", "mw")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				endpoint = func(name string) string { return "ipc://" + filepath.Join(dir, name) }
			}
			rig := newWaveRig(t, endpoint, 2)
			seen := map[int]bool{}
			for len(seen) < 2 {
				seen[within(t, rig.load, "engine load")] = true
			}

			// First request of wave 0 to rank 0: rank 1 is woken.
			w := rig.node.OnAdd(0)
			if w != 0 {
				t.Fatalf("OnAdd = %d, want 0", w)
			}
			rig.add(t, 0, "a", w)
			rig.waitWave(t, 0, true)
			rig.waitFinished(t, "a")
			rig.waitWave(t, 1, false) // rank 0's wave_complete(0)

			// An ADD stamped with the finished wave reaches idle rank 0: it
			// reports start_wave(1) and the coordinator starts wave 1.
			rig.add(t, 0, "b", 0)
			rig.waitWave(t, 1, true)
			rig.waitFinished(t, "b")
			rig.waitWave(t, 2, false)
			if w, r := rig.node.Wave(); w != 2 || r {
				t.Fatalf("Wave() = (%d, %v), want (2, false)", w, r)
			}
		})
	}
}
