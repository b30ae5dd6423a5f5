package frontend

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

func TestHandshakeStateMachine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	hello := wire.HandshakeStatus{Status: "HELLO", Headless: true}
	ready := wire.HandshakeStatus{Status: "READY", Headless: true}
	reg := wire.ReadyResponse{MaxModelLen: wire.SomeInt(4096)}
	type step struct {
		name    string
		do      func(h *handshake) error
		wantErr string // phase of the expected error, "" = none
		wantUp  bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"register then ready", []step{
			{"hello", func(h *handshake) error { return h.onHello(t0, hello) }, "", false},
			{"reg", func(h *handshake) error { return h.onRegistration(t0, reg) }, "", false},
			{"ready", func(h *handshake) error { return h.onReady(t0, ready) }, "", true},
		}},
		{"ready then register", []step{
			{"hello", func(h *handshake) error { return h.onHello(t0, hello) }, "", false},
			{"ready", func(h *handshake) error { return h.onReady(t0, ready) }, "", false},
			{"reg", func(h *handshake) error { return h.onRegistration(t0, reg) }, "", true},
		}},
		{"duplicate hello", []step{
			{"hello", func(h *handshake) error { return h.onHello(t0, hello) }, "", false},
			{"hello", func(h *handshake) error { return h.onHello(t0, hello) }, PhaseHello, false},
		}},
		{"ready before hello", []step{
			{"ready", func(h *handshake) error { return h.onReady(t0, ready) }, PhaseReady, false},
		}},
		{"registration before hello", []step{
			{"reg", func(h *handshake) error { return h.onRegistration(t0, reg) }, PhaseRegistration, false},
		}},
		{"wrong status", []step{
			{"hello", func(h *handshake) error { return h.onHello(t0, ready) }, PhaseHello, false},
		}},
		{"duplicate registration", []step{
			{"hello", func(h *handshake) error { return h.onHello(t0, hello) }, "", false},
			{"reg", func(h *handshake) error { return h.onRegistration(t0, reg) }, "", false},
			{"reg", func(h *handshake) error { return h.onRegistration(t0, reg) }, PhaseRegistration, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandshake(3, time.Minute)
			for _, s := range tt.steps {
				err := s.do(h)
				var he *HandshakeError
				switch {
				case s.wantErr == "" && err != nil:
					t.Fatalf("%s: %v", s.name, err)
				case s.wantErr != "" && (!errors.As(err, &he) || he.Phase != s.wantErr || he.Rank != 3):
					t.Fatalf("%s: want %s error, got %v", s.name, s.wantErr, err)
				}
				if h.seen() != s.wantUp {
					t.Fatalf("%s: seen=%v", s.name, h.seen())
				}
			}
		})
	}
}

func TestHandshakeDeadlines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newHandshake(2, time.Minute)
	if err := h.check(t0.Add(time.Hour)); err != nil {
		t.Fatalf("no HELLO deadline expected: %v", err)
	}
	h.onHello(t0, wire.HandshakeStatus{Status: "HELLO"})
	if err := h.check(t0.Add(59 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var pt *PhaseTimeoutError
	if err := h.check(t0.Add(time.Minute)); !errors.As(err, &pt) || pt.Phase != PhaseRegistration || pt.Rank != 2 {
		t.Fatalf("want registration timeout, got %v", err)
	}
	h.onRegistration(t0.Add(30*time.Second), wire.ReadyResponse{})
	if err := h.check(t0.Add(time.Minute + 30*time.Second)); !errors.As(err, &pt) || pt.Phase != PhaseReady {
		t.Fatalf("want READY timeout, got %v", err)
	}
	b := newBootstrappedHandshake(5, time.Minute, t0)
	if err := b.check(t0.Add(time.Minute)); !errors.As(err, &pt) || pt.Phase != PhaseRegistration || pt.Rank != 5 {
		t.Fatalf("bootstrapped: want registration timeout, got %v", err)
	}
	b.onRegistration(t0, wire.ReadyResponse{Empty: true})
	if !b.seen() {
		t.Fatal("bootstrapped engine not up after registration")
	}
}

// Ranks are listed numerically: 256 (identity 00 01) after 1 (01 00), not in the
// byte order of their identities.
func TestTableRankOrder(t *testing.T) {
	f := &Frontend{cfg: Config{SendQueue: 1}}
	tb := newTable()
	for _, r := range []int{256, 1, 0, 2} {
		tb = tb.with(r, f.newEngine(r, 0, nil, nil, true, nil))
	}
	if !slices.Equal(tb.ranks, []int{0, 1, 2, 256}) {
		t.Fatalf("ranks %v", tb.ranks)
	}
	old := tb
	tb = tb.with(1, f.newEngine(1, 1, nil, nil, true, nil))
	if old.get(1).gen != 0 || tb.get(1).gen != 1 || !slices.Equal(tb.ranks, old.ranks) {
		t.Fatal("copy-on-write broken")
	}
	if wire.IdentityOf(256) != (wire.Identity{0, 1}) {
		t.Fatal("identity of 256")
	}
}
