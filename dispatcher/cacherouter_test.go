package dispatcher

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// routeTo is a CacheRouter that always answers rank (or -1).
type routeTo struct {
	rank  int
	calls atomic.Int64
}

func (r *routeTo) Route(_ *wire.EngineCoreRequest, loads []Load, _ uint64) int {
	r.calls.Add(1)
	for i := range loads {
		if loads[i].Rank == r.rank && loads[i].Ready {
			return i
		}
	}
	return -1
}

// A CacheRouter's answer wins for requests that pin no rank; a pinned rank is never
// overridden, and -1 falls back to least-loaded.
func TestCacheRouterChoosesUnpinned(t *testing.T) {
	cr := &routeTo{rank: 2}
	h := newHarness(t, Config{Policy: PolicyKV, CacheRouter: cr}, 0, 1, 2)
	for i := range 3 {
		if _, err := h.d.Submit(context.Background(), mkReq("a"+string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
		if fr := h.s.next(t, wire.RequestAdd); fr.rank != 2 {
			t.Fatalf("request %d went to rank %d, want the router's 2", i, fr.rank)
		}
	}
	if _, err := h.d.Submit(context.Background(), pinned("p", 0)); err != nil {
		t.Fatal(err)
	}
	if fr := h.s.next(t, wire.RequestAdd); fr.rank != 0 {
		t.Fatalf("pinned request went to rank %d", fr.rank)
	}
	if cr.calls.Load() != 3 {
		t.Fatalf("router asked %d times, want 3 (never for a pinned request)", cr.calls.Load())
	}
	cr.rank = 9 // not there: least-loaded chooses among 0..2
	if _, err := h.d.Submit(context.Background(), mkReq("f")); err != nil {
		t.Fatal(err)
	}
	if fr := h.s.next(t, wire.RequestAdd); fr.rank == 2 {
		t.Fatalf("fallback chose the busiest rank 2")
	}
}

func TestCacheRouterGoesWithItsPolicies(t *testing.T) {
	for _, tt := range []struct {
		policy string
		cr     CacheRouter
		ok     bool
	}{
		{PolicyKV, &routeTo{}, true},
		{PolicyPrefix, &routeTo{}, true},
		{PolicyKV, nil, false},
		{PolicyLeastLoaded, &routeTo{}, false},
		{PolicyLeastLoaded, nil, true},
	} {
		err := Config{Policy: tt.policy, CacheRouter: tt.cr}.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "CacheRouter")) {
			t.Errorf("%s with router %v: %v", tt.policy, tt.cr != nil, err)
		}
	}
}
