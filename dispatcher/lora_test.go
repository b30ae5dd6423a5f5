package dispatcher

import (
	"context"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/wiretest"
	"github.com/switchyard-llm/switchyard/wire"
)

// loraRouteTo is a LoRARouter that always answers one index.
type loraRouteTo int

func (r loraRouteTo) Route(*wire.EngineCoreRequest, []Load, uint64) int { return int(r) }

func TestLoRARequestsSkipEnginesWithoutLoRAFields(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{Layout: wiretest.NoLoRALayout(t)})
	h.d.EngineUpWith(1, EngineLimits{Layout: wire.Native()})
	for i := range 4 {
		r := mkReq("lora-" + string(rune('a'+i)))
		r.LoRA = &wire.LoRARequest{Name: "sql", IntID: 1, Path: "/p"}
		s, err := h.d.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if s.Rank() != 1 {
			t.Fatalf("a LoRA request went to rank %d, whose layout has no LoRARequest fields", s.Rank())
		}
		if add := h.s.next(t, wire.RequestAdd); add.add.LoRA == nil || add.add.LoRA.Name != "sql" {
			t.Fatalf("ADD without the LoRARequest: %+v", add.add)
		}
	}
}

func TestLoRARouterAskedFirst(t *testing.T) {
	h := newHarness(t, Config{LoRARouter: loraRouteTo(1)}, 0, 1)
	r := mkReq("a")
	r.LoRA = &wire.LoRARequest{Name: "sql", IntID: 1, Path: "/p"}
	s, err := h.d.Submit(context.Background(), r)
	if err != nil || s.Rank() != 1 {
		t.Fatalf("rank %v %v, want the router's 1", s, err)
	}
	s, err = h.d.Submit(context.Background(), mkReq("b"))
	if err != nil || s.Rank() != 0 {
		t.Fatalf("a request without LoRA: rank %v %v, want least-loaded 0", s, err)
	}
}

func TestCallUtilityEachEncodesPerLayout(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{Layout: wire.BuiltinLayout("v0.18")})
	h.d.EngineUpWith(2, EngineLimits{Layout: wire.Native()})
	seen := map[int]string{}
	go func() {
		for range 2 {
			fr := h.s.next(t, wire.RequestUtility)
			h.d.HandleOutputs(fr.rank, &wire.EngineCoreOutputs{UtilityOutput: &wire.UtilityOutput{CallID: fr.callID, HasResult: true, Result: wire.Raw{0xc3}}})
		}
	}()
	res, err := h.d.CallUtilityEach(waitCtx(t), "m", nil, func(rank int, l *wire.Layout) (wire.Raw, error) {
		seen[rank] = l.Name
		return wire.Raw{0x90}, nil
	})
	if err != nil || len(res.Results) != 2 || seen[0] != "v0.18" || seen[2] != wire.Native().Name {
		t.Fatalf("%+v %v %v", res, err, seen)
	}
}
