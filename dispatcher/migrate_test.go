package dispatcher

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

func moving(id string, maxTokens, minTokens int64) *wire.EngineCoreRequest {
	r := mkReq(id)
	r.Sampling.MaxTokens = wire.SomeInt(maxTokens)
	r.Sampling.MinTokens = minTokens
	return r
}

func migrations(h *harness, cause, outcome string) float64 {
	return testutil.ToFloat64(h.d.m.migrations.WithLabelValues(cause, outcome))
}

// A Stream whose engine dies moves: the new ADD carries prompt + delivered tokens,
// reduced budgets and a fresh id; its outputs continue the same Stream, and the
// old engine's late outputs for the old id are ignored.
func TestMigrateStreamContinues(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	s := submitOn(t, h, moving("a", 10, 4), 0)
	from := s.Rank()
	h.s.next(t, wire.RequestAdd)
	h.d.HandleOutputs(from, batch(from, tokOut("a", 11, 12), tokOut("a", 13)))
	h.d.EngineDown(from, errors.New("ENGINE_CORE_DEAD"))

	add := h.s.next(t, wire.RequestAdd)
	to := 1 - from
	if add.rank != to || s.Rank() != to {
		t.Fatalf("moved to rank %d (stream says %d), want %d", add.rank, s.Rank(), to)
	}
	req := add.add
	if !slices.Equal(req.PromptTokenIDs, []int64{1, 2, 3, 11, 12, 13}) || req.Sampling.MaxTokens.Value != 7 || req.Sampling.MinTokens != 1 {
		t.Fatalf("continuation: prompt %v max %v min %d", req.PromptTokenIDs, req.Sampling.MaxTokens, req.Sampling.MinTokens)
	}
	if req.RequestID == "a" || !strings.HasPrefix(req.RequestID, "a#m") {
		t.Fatalf("engine id %q: want a fresh one", req.RequestID)
	}
	// The client's id stays live (reserved) while the request runs elsewhere.
	if _, err := h.d.Submit(context.Background(), mkReq("a")); !errIsDup(err) {
		t.Fatalf("resubmitting the client id during the move: %v", err)
	}
	h.d.HandleOutputs(from, batch(from, tokOut("a", 99))) // late, from the dead engine
	h.d.HandleOutputs(to, batch(to, tokOut(req.RequestID, 14), finOut(req.RequestID, wire.FinishLength, 15)))
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	var toks []int64
	for _, o := range outs {
		toks = append(toks, o.TokenIDs...)
	}
	if !slices.Equal(toks, []int64{11, 12, 13, 14, 15}) || outs[len(outs)-1].Finish != wire.FinishLength {
		t.Fatalf("stream: %v", outs)
	}
	if h.d.InFlight() != 0 || h.d.table.Size() != 0 {
		t.Fatalf("in flight %d, table %d", h.d.InFlight(), h.d.table.Size())
	}
	if migrations(h, "engine_down", "moved") != 1 || testutil.ToFloat64(h.d.m.saved) != 1 {
		t.Errorf("metrics: moved %v saved %v", migrations(h, "engine_down", "moved"), testutil.ToFloat64(h.d.m.saved))
	}
}

// submitOn submits r unpinned with rank made the policy's choice (the other
// ranks look busy while it is chosen), so a test knows where it lands.
func submitOn(t *testing.T, h *harness, r *wire.EngineCoreRequest, rank int) *Stream {
	t.Helper()
	for _, e := range h.d.engines.Load().list {
		if e.rank != rank {
			e.inFlight.Add(1000)
			defer e.inFlight.Add(-1000)
		}
	}
	s, err := h.d.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func errIsDup(err error) bool {
	var dup *DuplicateRequestId
	return errors.As(err, &dup)
}

// A callback request keeps receiving outputs under its own id after a move.
func TestMigrateCallbackKeepsItsID(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	var ids []string
	var toks []int64
	var end error
	rank, err := h.d.SubmitFunc(moving("cb", 5, 0), func(_ int, o *wire.EngineCoreOutput, err error) {
		if err != nil {
			end = err
			return
		}
		ids = append(ids, o.RequestID)
		toks = append(toks, o.NewTokenIDs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.s.next(t, wire.RequestAdd)
	h.d.HandleOutputs(rank, batch(rank, tokOut("cb", 7, 8)))
	h.d.EngineDown(rank, errors.New("EOF"))
	add := h.s.next(t, wire.RequestAdd)
	if add.add.Sampling.MaxTokens.Value != 3 || !slices.Equal(add.add.PromptTokenIDs, []int64{1, 2, 3, 7, 8}) {
		t.Fatalf("continuation %+v", add.add)
	}
	h.d.HandleOutputs(add.rank, batch(add.rank, finOut(add.add.RequestID, wire.FinishLength, 9, 10, 11)))
	if end != nil || !slices.Equal(toks, []int64{7, 8, 9, 10, 11}) || slices.ContainsFunc(ids, func(id string) bool { return id != "cb" }) {
		t.Fatalf("ids %v tokens %v end %v", ids, toks, end)
	}
}

// What cannot move fails with a *MigrationError that still unwraps to the
// engine's cause; pinned requests fail as before; the limit holds.
func TestMigrateRefusals(t *testing.T) {
	structured := moving("so", 8, 0)
	structured.Sampling.StructuredOutputs = wire.Raw{0x81, 0xa4, 'j', 's', 'o', 'n', 0xa2, '{', '}'}
	embeds := moving("pe", 8, 0)
	embeds.PromptEmbeds = &wire.Tensor{DType: "float32", Shape: []int64{1}, Data: make([]byte, 4)}
	mm := moving("mm", 8, 0)
	mm.MMFeatures = wire.Raw{0x90}
	tests := []struct {
		name    string
		cfg     Config
		req     *wire.EngineCoreRequest
		reason  string // "" = plain *EngineDownError, no move tried
		outcome string
	}{
		{"structured outputs", Config{}, structured, "structured outputs", "unmovable"},
		{"prompt_embeds", Config{}, embeds, "prompt_embeds", "unmovable"},
		{"multimodal", Config{}, mm, "multimodal", "unmovable"},
		{"pinned", Config{}, pinned("pin", 0), "", ""},
		{"off", Config{MaxMigrations: -1}, moving("off", 8, 0), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg, 0, 1)
			s, err := h.d.Submit(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			rank := s.Rank()
			h.d.EngineDown(rank, errors.New("ENGINE_CORE_DEAD"))
			_, err = recvAll(t, s)
			var down *EngineDownError
			var me *MigrationError
			if !errors.As(err, &down) || down.Rank != rank {
				t.Fatalf("err %v: want an *EngineDownError of rank %d", err, rank)
			}
			if tt.reason == "" {
				if errors.As(err, &me) {
					t.Fatalf("err %v: no move should have been tried", err)
				}
				return
			}
			if !errors.As(err, &me) || !strings.Contains(me.Reason, tt.reason) {
				t.Fatalf("err %v: want a *MigrationError about %q", err, tt.reason)
			}
			if migrations(h, "engine_down", tt.outcome) != 1 {
				t.Errorf("outcome %s not counted", tt.outcome)
			}
		})
	}
}

func TestMigrateLimitAndNoEngine(t *testing.T) {
	h := newHarness(t, Config{MaxMigrations: 2}, 0, 1, 2)
	s, err := h.d.Submit(context.Background(), moving("lim", 50, 0))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		h.d.EngineDown(s.Rank(), errors.New("dead"))
		h.s.next(t, wire.RequestAdd)
	}
	h.d.EngineDown(s.Rank(), errors.New("dead"))
	_, err = recvAll(t, s)
	var me *MigrationError
	if !errors.As(err, &me) || !strings.Contains(me.Reason, "max-migrations 2") {
		t.Fatalf("after the limit: %v", err)
	}
	if migrations(h, "engine_down", "moved") != 2 || migrations(h, "engine_down", "limit") != 1 {
		t.Error("limit not counted")
	}
	// A lone engine: nowhere to go.
	h2 := newHarness(t, Config{}, 0)
	s2, _ := h2.d.Submit(context.Background(), moving("alone", 5, 0))
	h2.d.EngineDown(0, errors.New("dead"))
	if _, err := recvAll(t, s2); !errors.As(err, &me) || migrations(h2, "engine_down", "no_engine") != 1 {
		t.Fatalf("alone: %v", err)
	}
	if h2.d.table.Size() != 0 || h.d.table.Size() != 0 {
		t.Error("ids left in the table")
	}
}

// A rank that refuses the frame or cannot encode it is skipped.
func TestMigrateSkipsRefusingRank(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1, 2)
	s := submitOn(t, h, moving("sk", 5, 0), 0)
	h.s.next(t, wire.RequestAdd)
	h.s.setFail(1, errors.New("queue full"))
	h.d.EngineDown(0, errors.New("dead"))
	add := h.s.next(t, wire.RequestAdd)
	if add.rank != 2 || s.Rank() != 2 {
		t.Fatalf("moved to %d, want 2", add.rank)
	}
	if st := h.d.Engines(); st[1].InFlight != 0 || st[2].InFlight != 1 || st[0].InFlight != 0 {
		t.Fatalf("in flight: %+v", st)
	}
	s.Close()
}

// A client abort after a move aborts the new engine request, by its engine id,
// at the new rank; nothing is left on any engine.
func TestMigrateAbortAfterMove(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	submitOn(t, h, moving("ab", 50, 0), 0)
	h.s.next(t, wire.RequestAdd)
	h.d.EngineDown(0, errors.New("dead"))
	add := h.s.next(t, wire.RequestAdd)
	h.d.Abort("ab")
	ab := h.s.next(t, wire.RequestAbort)
	if ab.rank != 1 || !slices.Equal(ab.ids, []string{add.add.RequestID}) {
		t.Fatalf("abort %+v, want rank 1 id %s", ab, add.add.RequestID)
	}
	if h.d.table.Size() != 0 || h.d.InFlight() != 0 {
		t.Fatalf("table %d in flight %d", h.d.table.Size(), h.d.InFlight())
	}
}

// A stalled engine's requests move too, and the old id is aborted at it in case
// it wakes up.
func TestMigrateOnStall(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	h := newHarness(t, Config{Now: func() time.Time { return clock }}, 0, 1)
	s := submitOn(t, h, moving("st", 50, 0), 0)
	h.s.next(t, wire.RequestAdd)
	h.d.cfg.StallTimeout = time.Second
	clock = clock.Add(2 * time.Second)
	h.d.CheckStalls(clock)
	add := h.s.next(t, wire.RequestAdd)
	ab := h.s.next(t, wire.RequestAbort)
	if add.rank != 1 || ab.rank != 0 || !slices.Equal(ab.ids, []string{"st"}) {
		t.Fatalf("add to %d, abort %+v", add.rank, ab)
	}
	h.d.HandleOutputs(1, batch(1, finOut(add.add.RequestID, wire.FinishStop, 5)))
	if outs, err := recvAll(t, s); err != nil || len(outs) != 1 {
		t.Fatalf("%v %v", outs, err)
	}
	if h.d.table.Size() != 0 {
		t.Errorf("table %d", h.d.table.Size())
	}
}

// A continuation that fits no live engine's context fails with the reason.
func TestMigrateContextNoLongerFits(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{MaxModelLen: 100})
	h.d.EngineUpWith(1, EngineLimits{MaxModelLen: 6})
	s := submitOn(t, h, moving("long", 20, 0), 0)
	h.s.next(t, wire.RequestAdd)
	h.d.HandleOutputs(0, batch(0, tokOut("long", 4, 5, 6)))
	h.d.EngineDown(0, errors.New("dead"))
	_, err := recvAll(t, s)
	var me *MigrationError
	if !errors.As(err, &me) || !strings.Contains(me.Reason, "maximum model length of engine rank 1 is 6") {
		t.Fatalf("%v", err)
	}
	if migrations(h, "engine_down", "no_engine") != 1 {
		t.Error("not counted")
	}
}

// MigratePinned lets a pinned request move (to any rank); during Drain requests
// still move, and Drain waits for them on their new rank.
func TestMigratePinnedAndDuringDrain(t *testing.T) {
	h := newHarness(t, Config{MigratePinned: true}, 0, 1)
	s, err := h.d.Submit(context.Background(), pinned("pin", 0))
	if err != nil {
		t.Fatal(err)
	}
	h.s.next(t, wire.RequestAdd)
	drained := make(chan error, 1)
	go func() { drained <- h.d.Drain(context.Background()) }()
	for deadline := time.Now().Add(testwait.Deadline); !h.d.draining.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Drain never started")
		}
	}
	h.d.EngineDown(0, errors.New("dead"))
	add := h.s.next(t, wire.RequestAdd)
	if add.rank != 1 || add.add.DataParallelRank.Valid {
		t.Fatalf("moved to %d, pin %v", add.rank, add.add.DataParallelRank)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with the request still running on rank 1", err)
	case <-time.After(20 * time.Millisecond):
	}
	h.d.HandleOutputs(1, batch(1, finOut(add.add.RequestID, wire.FinishLength, 9)))
	if _, err := recvAll(t, s); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, drained, "Drain to return"); err != nil {
		t.Fatal(err)
	}
}
