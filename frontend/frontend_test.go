package frontend

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// Three engines handshake, register and serve; every request is routed by identity
// to the rank it was sent to and its tokens are exactly the mock's stream.
func TestHandshakeRegistrationRouting(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		f := startFrontend(t, testConfig(t, tr, 3), rec)
		for rank := range 3 {
			startMock(t, mockConfig(f.HandshakeAddress(), rank, 3))
		}
		waitReady(t, f, 3)
		infos := f.Engines()
		for i, info := range infos {
			if info.Rank != i || info.State != Ready || info.Identity != wire.IdentityOf(i) {
				t.Fatalf("engine %d: %+v", i, info)
			}
			if !info.Ready.DataParallelRank.Valid || info.Ready.DataParallelRank.Value != int64(i) || info.Ready.MaxModelLen.Value != 8192 {
				t.Fatalf("engine %d registration: %+v", i, info.Ready)
			}
			// The HELLO came over the loopback: where a wildcard KV-event endpoint is reached.
			if info.RemoteHost != "127.0.0.1" {
				t.Fatalf("engine %d remote host %q", i, info.RemoteHost)
			}
		}
		const perRank = 4
		for rank := range 3 {
			for j := range perRank {
				id := fmt.Sprintf("r%d-req%d", rank, j)
				if err := f.Send(rank, wire.RequestAdd, addBody(t, id, int64(5+j), nil), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		rec.waitFor(t, "all requests finished", func() bool { return len(rec.finished) == 3*perRank })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for rank := range 3 {
			for j := range perRank {
				id := fmt.Sprintf("r%d-req%d", rank, j)
				if got, want := rec.tokens[id], expectedTokens(id, 5+j); !slices.Equal(got, want) {
					t.Errorf("%s tokens %v, want %v", id, got, want)
				}
				if rec.byRank[id] != rank || rec.finished[id] != wire.FinishLength {
					t.Errorf("%s: rank %d finish %v", id, rec.byRank[id], rec.finished[id])
				}
			}
		}
		if err := f.Send(7, wire.RequestAdd, addBody(t, "x", 1, nil), nil); !errors.Is(err, ErrUnknownRank) {
			t.Fatalf("send to rank 7: %v", err)
		}
	})
}
