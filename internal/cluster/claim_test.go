package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
)

// TestNameHeldByLiveFrontend: a second frontend under a live frontend's name
// is refused with an error naming the holder, on the same addresses (where
// the client table alone would let it in) and on others; once the holder
// stops, or is killed and its lease runs out, the name is free again.
func TestNameHeldByLiveFrontend(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := memberConfig(ownClient(t, c), "/nh/", "fe")
	cfg.HTTP = "10.0.0.1:8000"
	first, err := Join(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := memberConfig(ownClient(t, c), "/nh/", "fe")
	moved := other
	moved.Input, moved.Output = "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"
	for what, cfg := range map[string]Config{"same addresses": other, "other addresses": moved} {
		began := time.Now()
		m, err := Join(ctx, cfg)
		var held *NameHeldError
		if !errors.As(err, &held) {
			if m != nil {
				m.Close()
			}
			t.Fatalf("%s: second frontend named fe: %v, want NameHeldError", what, err)
		}
		if !strings.Contains(err.Error(), `"fe"`) || !strings.Contains(err.Error(), "10.0.0.1:8000") {
			t.Errorf("%s: error does not name the holder: %v", what, err)
		}
		t.Logf("%s: refused after %v: %v", what, time.Since(began).Round(time.Millisecond), err)
	}
	// A clean stop frees the name at once.
	first.Close()
	second, err := Join(ctx, other)
	if err != nil {
		t.Fatalf("after the holder stopped: %v", err)
	}
	// A kill (connection cut, nothing revoked) frees it after the lease.
	second.cfg.Client.Close()
	began := time.Now()
	third, err := Join(ctx, memberConfig(ownClient(t, c), "/nh/", "fe"))
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	t.Logf("a restart after a kill joined after %v (TTL 1 s)", time.Since(began).Round(time.Millisecond))
	third.Close()
	second.Close()
}
