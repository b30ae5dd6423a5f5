package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// pdHarness is a decode dispatcher split over a prefill dispatcher, both on fake
// senders.
type pdHarness struct {
	dec, pre *harness
}

func newPDHarness(t *testing.T, cfg PDConfig, decodeRanks, prefillRanks []int) *pdHarness {
	t.Helper()
	pre := newHarness(t, Config{MaxMigrations: -1}, prefillRanks...)
	dec := newHarness(t, Config{}, decodeRanks...)
	cfg.Prefill = pre.d
	if err := dec.d.EnablePD(cfg); err != nil {
		t.Fatal(err)
	}
	return &pdHarness{dec: dec, pre: pre}
}

func longReq(id string, n int) *wire.EngineCoreRequest {
	r := mkReq(id)
	r.PromptTokenIDs = make([]int64, n)
	for i := range r.PromptTokenIDs {
		r.PromptTokenIDs[i] = int64(10 + i)
	}
	r.Sampling.MaxTokens = wire.SomeInt(5)
	return r
}

// kvParams decodes the kv_transfer_params an ADD carries in extra_args.
func kvParams(t *testing.T, req *wire.EngineCoreRequest) map[string]any {
	t.Helper()
	if req.Sampling == nil || req.Sampling.ExtraArgs == nil {
		return nil
	}
	var extra map[string]any
	if err := msgpack.Unmarshal(req.Sampling.ExtraArgs, &extra); err != nil {
		t.Fatalf("extra_args: %v", err)
	}
	kv, _ := extra[wire.KVTransferParamsKey].(map[string]any)
	return kv
}

func mustPack(t *testing.T, v any) wire.Raw {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func prefillDone(id string, params wire.Raw) wire.EngineCoreOutput {
	o := finOut(id, wire.FinishLength, 99)
	o.KVTransferParams = params
	return o
}

func TestPDPrefillThenDecode(t *testing.T) {
	h := newPDHarness(t, PDConfig{MinPromptTokens: 4}, []int{0, 1}, []int{0})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	if p.add.RequestID != "x#p1" || p.add.Sampling.MaxTokens.Value != 1 || p.add.Sampling.MinTokens != 0 {
		t.Fatalf("prefill leg: id %q max_tokens %v", p.add.RequestID, p.add.Sampling.MaxTokens)
	}
	kv := kvParams(t, p.add)
	if kv["do_remote_decode"] != true || kv["do_remote_prefill"] != false || kv["transfer_id"] != "x#p1" {
		t.Fatalf("prefill kv_transfer_params = %v", kv)
	}
	for _, k := range []string{"remote_engine_id", "remote_block_ids", "remote_host", "remote_port"} {
		if v, ok := kv[k]; !ok || v != nil {
			t.Errorf("prefill kv_transfer_params[%s] = %v, %v; want nil", k, v, ok)
		}
	}
	if n := len(h.dec.s.sent(wire.RequestAdd)); n != 0 {
		t.Fatalf("%d decode ADDs before the prefill finished", n)
	}
	if got := h.dec.d.PDInFlight(); got != 1 {
		t.Errorf("PDInFlight = %d, want 1", got)
	}
	if got := h.dec.d.InFlight(); got != 1 {
		t.Errorf("InFlight = %d, want 1 (a request in its prefill part is in flight)", got)
	}
	params := mustPack(t, map[string]any{"do_remote_prefill": true, "do_remote_decode": false,
		"remote_engine_id": "pre-0", "remote_block_ids": []int{1, 2}, "transfer_id": "x#p1"})
	h.pre.d.HandleOutputs(0, batch(0, prefillDone("x#p1", params)))
	dd := h.dec.s.next(t, wire.RequestAdd)
	if dd.add.RequestID != "x" || dd.add.Sampling.MaxTokens.Value != 5 {
		t.Fatalf("decode leg: id %q max_tokens %v", dd.add.RequestID, dd.add.Sampling.MaxTokens)
	}
	got := kvParams(t, dd.add)
	if got["do_remote_prefill"] != true || got["remote_engine_id"] != "pre-0" || got["transfer_id"] != "x#p1" {
		t.Fatalf("decode kv_transfer_params = %v", got)
	}
	h.dec.d.HandleOutputs(dd.rank, batch(dd.rank, tokOut("x", 7, 8), finOut("x", wire.FinishLength, 9)))
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	var toks []int64
	for _, o := range outs {
		toks = append(toks, o.TokenIDs...)
	}
	if len(toks) != 3 || toks[0] != 7 {
		t.Fatalf("stream tokens %v: want the decode leg's only", toks)
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.pairs); v != 1 {
		t.Errorf("pairs = %v, want 1", v)
	}
	if h.dec.d.InFlight() != 0 || h.pre.d.InFlight() != 0 {
		t.Errorf("in flight after the end: decode %d prefill %d", h.dec.d.InFlight(), h.pre.d.InFlight())
	}
}

func TestPDConditionalLocal(t *testing.T) {
	h := newPDHarness(t, PDConfig{MinPromptTokens: 16, BusyScore: 2}, []int{0}, []int{0})
	// Short: prefilled by the decode engine, a plain ADD.
	s, err := h.dec.d.Submit(context.Background(), longReq("short", 8))
	if err != nil {
		t.Fatal(err)
	}
	dd := h.dec.s.next(t, wire.RequestAdd)
	if dd.add.RequestID != "short" || kvParams(t, dd.add) != nil {
		t.Fatalf("short prompt: %q kv %v", dd.add.RequestID, kvParams(t, dd.add))
	}
	s.Close()
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDShortPrompt]); v != 1 {
		t.Errorf("local short_prompt = %v", v)
	}
	// Busy: two live prefill legs reach the threshold.
	for _, id := range []string{"a", "b"} {
		if _, err := h.dec.d.Submit(context.Background(), longReq(id, 32)); err != nil {
			t.Fatal(err)
		}
		h.pre.s.next(t, wire.RequestAdd)
	}
	if _, err := h.dec.d.Submit(context.Background(), longReq("c", 32)); err != nil {
		t.Fatal(err)
	}
	dd = h.dec.s.next(t, wire.RequestAdd)
	if dd.add.RequestID != "c" || kvParams(t, dd.add) != nil {
		t.Fatalf("busy prefill: %q kv %v", dd.add.RequestID, kvParams(t, dd.add))
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDPrefillBusy]); v != 1 {
		t.Errorf("local prefill_busy = %v", v)
	}
	// No prefill engine: local.
	h.pre.d.EngineDown(0, errors.New("gone"))
	if _, err := h.dec.d.Submit(context.Background(), longReq("d", 32)); err != nil {
		t.Fatal(err)
	}
	for {
		dd = h.dec.s.next(t, wire.RequestAdd)
		if dd.add.RequestID == "d" {
			break
		}
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDNoPrefill]); v != 1 {
		t.Errorf("local no_prefill_engine = %v", v)
	}
}

func TestPDPrefillDiesRetriedElsewhere(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0, 1})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p1 := h.pre.s.next(t, wire.RequestAdd)
	h.pre.d.EngineDown(p1.rank, errors.New("killed"))
	p2 := h.pre.s.next(t, wire.RequestAdd)
	if p2.rank == p1.rank || p2.add.RequestID != "x#p2" {
		t.Fatalf("retry leg %q on rank %d (first on %d)", p2.add.RequestID, p2.rank, p1.rank)
	}
	if kvParams(t, p2.add)["transfer_id"] != "x#p2" {
		t.Fatalf("retry leg transfer_id: %v", kvParams(t, p2.add))
	}
	h.pre.d.HandleOutputs(p2.rank, batch(p2.rank, prefillDone("x#p2", mustPack(t, map[string]any{"do_remote_prefill": true, "transfer_id": "x#p2"}))))
	dd := h.dec.s.next(t, wire.RequestAdd)
	if kvParams(t, dd.add)["transfer_id"] != "x#p2" {
		t.Fatalf("decode got %v", kvParams(t, dd.add))
	}
	h.dec.d.HandleOutputs(0, batch(0, finOut("x", wire.FinishLength, 1)))
	if _, err := recvAll(t, s); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.retries); v != 1 {
		t.Errorf("retries = %v", v)
	}
}

func TestPDEveryPrefillFailsLocal(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0, 1})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p1 := h.pre.s.next(t, wire.RequestAdd)
	// The engine drops it (finish error): retried on the other one.
	h.pre.d.HandleOutputs(p1.rank, batch(p1.rank, finOut(p1.add.RequestID, wire.FinishError)))
	p2 := h.pre.s.next(t, wire.RequestAdd)
	if p2.rank == p1.rank {
		t.Fatalf("retry on the same rank %d", p2.rank)
	}
	h.pre.d.HandleOutputs(p2.rank, batch(p2.rank, finOut(p2.add.RequestID, wire.FinishError)))
	dd := h.dec.s.next(t, wire.RequestAdd)
	if dd.add.RequestID != "x" || kvParams(t, dd.add) != nil {
		t.Fatalf("local fallback: %q kv %v", dd.add.RequestID, kvParams(t, dd.add))
	}
	h.dec.d.HandleOutputs(0, batch(0, finOut("x", wire.FinishLength, 1)))
	if _, err := recvAll(t, s); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDPrefillFailed]); v != 1 {
		t.Errorf("local prefill_failed = %v", v)
	}
}

func TestPDNoParamsLocal(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	if _, err := h.dec.d.Submit(context.Background(), longReq("x", 32)); err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	h.pre.d.HandleOutputs(0, batch(0, finOut(p.add.RequestID, wire.FinishLength, 3)))
	dd := h.dec.s.next(t, wire.RequestAdd)
	if kvParams(t, dd.add) != nil {
		t.Fatalf("kv params without a prefill's: %v", kvParams(t, dd.add))
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDNoKVParams]); v != 1 {
		t.Errorf("local no_kv_transfer_params = %v", v)
	}
}

func TestPDAbortWhilePrefilling(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	s.Close()
	ab := h.pre.s.next(t, wire.RequestAbort)
	if len(ab.ids) != 1 || ab.ids[0] != p.add.RequestID {
		t.Fatalf("prefill ABORT %v, want [%s]", ab.ids, p.add.RequestID)
	}
	outs, err := recvAll(t, s)
	if err != nil || len(outs) != 1 || outs[0].Finish != wire.FinishAbort {
		t.Fatalf("stream after abort: %v %v", outs, err)
	}
	// A late final output of the leg hands nothing over.
	h.pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, mustPack(t, map[string]any{"x": 1}))))
	time.Sleep(20 * time.Millisecond)
	if n := len(h.dec.s.sent(wire.RequestAdd)); n != 0 {
		t.Fatalf("%d decode ADDs after an abort", n)
	}
	if n := len(h.dec.s.sent(wire.RequestAbort)); n != 0 {
		t.Fatalf("decode engines got %d ABORTs for a request they never had", n)
	}
	if h.dec.d.InFlight() != 0 {
		t.Fatalf("in flight %d after the abort", h.dec.d.InFlight())
	}
	// The id is free again.
	if _, err := h.dec.d.Submit(context.Background(), longReq("x", 32)); err != nil {
		t.Fatalf("resubmitting the id: %v", err)
	}
}

func TestPDAbortAfterHandoffAbortsDecode(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	h.pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, mustPack(t, map[string]any{"do_remote_prefill": true}))))
	h.dec.s.next(t, wire.RequestAdd)
	s.Close()
	ab := h.dec.s.next(t, wire.RequestAbort)
	if len(ab.ids) != 1 || ab.ids[0] != "x" {
		t.Fatalf("decode ABORT %v", ab.ids)
	}
}

func TestPDCallbackAndClose(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	got := make(chan error, 1)
	rank, err := h.dec.d.SubmitFunc(longReq("cb", 32), func(rank int, out *wire.EngineCoreOutput, err error) {
		if err != nil {
			got <- err
		}
	})
	if err != nil || rank != -1 {
		t.Fatalf("SubmitFunc: rank %d err %v (in its prefill part a request has no decode rank)", rank, err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	h.dec.d.Close()
	if err := testwait.Recv(t, got, "the callback's error"); !errors.Is(err, ErrClosed) {
		t.Fatalf("callback error %v", err)
	}
	ab := h.pre.s.next(t, wire.RequestAbort)
	if ab.ids[0] != p.add.RequestID {
		t.Fatalf("Close did not abort the prefill leg: %v", ab.ids)
	}
}

func TestPDDuplicateID(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	if _, err := h.dec.d.Submit(context.Background(), longReq("x", 32)); err != nil {
		t.Fatal(err)
	}
	var dup *DuplicateRequestId
	if _, err := h.dec.d.Submit(context.Background(), longReq("x", 32)); !errors.As(err, &dup) {
		t.Fatalf("duplicate live id: %v", err)
	}
}

// A decode engine that dies after the handoff: the request migrates as any other
// (a plain continuation ADD, prefilled by the new decode engine), and the
// client's stream goes on.
func TestPDDecodeDiesMigrates(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0, 1}, []int{0})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	h.pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, mustPack(t, map[string]any{"do_remote_prefill": true}))))
	dd := h.dec.s.next(t, wire.RequestAdd)
	h.dec.d.HandleOutputs(dd.rank, batch(dd.rank, tokOut("x", 7)))
	h.dec.d.EngineDown(dd.rank, errors.New("killed"))
	mv := h.dec.s.next(t, wire.RequestAdd)
	if mv.rank == dd.rank || kvParams(t, mv.add) != nil {
		t.Fatalf("continuation on rank %d (was %d) with kv params %v", mv.rank, dd.rank, kvParams(t, mv.add))
	}
	if n := len(mv.add.PromptTokenIDs); n != 33 || mv.add.Sampling.MaxTokens.Value != 4 {
		t.Fatalf("continuation prompt %d tokens, max_tokens %d", n, mv.add.Sampling.MaxTokens.Value)
	}
	h.dec.d.HandleOutputs(mv.rank, batch(mv.rank, finOut(mv.add.RequestID, wire.FinishLength, 8, 9, 10, 11)))
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range outs {
		n += len(o.TokenIDs)
	}
	if n != 5 {
		t.Fatalf("%d tokens, want 5", n)
	}
}

// Without a live decode engine at handoff time the request fails with a clear
// error instead of hanging.
func TestPDNoDecodeAtHandoff(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0})
	s, err := h.dec.d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	h.dec.d.EngineDown(0, errors.New("gone"))
	h.pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, mustPack(t, map[string]any{"do_remote_prefill": true}))))
	_, err = recvAll(t, s)
	if !errors.Is(err, ErrNoEngines) {
		t.Fatalf("err %v, want ErrNoEngines", err)
	}
	if h.dec.d.InFlight() != 0 {
		t.Fatalf("in flight %d", h.dec.d.InFlight())
	}
}

// A prefill engine that refuses the ADD (dead or stuck, not yet reported down):
// the leg goes to another; when every one refuses, the decode engine prefills.
func TestPDPrefillRefuses(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0}, []int{0, 1})
	h.pre.s.setFail(0, errors.New("stuck"))
	if _, err := h.dec.d.Submit(context.Background(), longReq("x", 32)); err != nil {
		t.Fatal(err)
	}
	if p := h.pre.s.next(t, wire.RequestAdd); p.rank != 1 {
		t.Fatalf("leg on rank %d, want 1", p.rank)
	}
	h.pre.s.setFail(1, errors.New("stuck"))
	if _, err := h.dec.d.Submit(context.Background(), longReq("y", 32)); err != nil {
		t.Fatal(err)
	}
	dd := h.dec.s.next(t, wire.RequestAdd)
	if dd.add.RequestID != "y" || kvParams(t, dd.add) != nil {
		t.Fatalf("every prefill refused: decode got %q kv %v", dd.add.RequestID, kvParams(t, dd.add))
	}
	if v := testutil.ToFloat64(h.dec.d.pd.m.local[PDPrefillFailed]); v != 1 {
		t.Errorf("local prefill_failed = %v", v)
	}
	if got := h.dec.d.PDInFlight(); got != 1 {
		t.Errorf("PDInFlight = %d, want 1 (x is still prefilling)", got)
	}
}

// A pinned rank is a decode rank: honoured at the handoff, refused at once when
// it is not connected.
func TestPDPinnedDecodeRank(t *testing.T) {
	h := newPDHarness(t, PDConfig{}, []int{0, 1}, []int{0})
	req := longReq("x", 32)
	req.DataParallelRank = wire.SomeInt(1)
	if _, err := h.dec.d.Submit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	p := h.pre.s.next(t, wire.RequestAdd)
	if p.add.DataParallelRank.Valid {
		t.Fatalf("the prefill leg is pinned to %d", p.add.DataParallelRank.Value)
	}
	h.pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, mustPack(t, map[string]any{"do_remote_prefill": true}))))
	if dd := h.dec.s.next(t, wire.RequestAdd); dd.rank != 1 {
		t.Fatalf("decode leg on rank %d, want the pinned 1", dd.rank)
	}
	bad := longReq("y", 32)
	bad.DataParallelRank = wire.SomeInt(7)
	var inv *InvalidDataParallelRank
	if _, err := h.dec.d.Submit(context.Background(), bad); !errors.As(err, &inv) {
		t.Fatalf("pinned to a missing rank: %v", err)
	}
	if n := len(h.pre.s.sent(wire.RequestAdd)); n != 1 {
		t.Fatalf("%d prefill legs, want 1 (none for the refused request)", n)
	}
}

// fullSender is a ClientSender whose queues are full until open is closed: a
// send with an ended context fails at once (with the context's cause, as the
// frontend's QueueFullError unwraps to), one that may wait waits for open.
type fullSender struct {
	*fakeSender
	open chan struct{}
}

func (f *fullSender) SendFrom(ctx context.Context, _ uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	select {
	case <-f.open:
	default:
		if ctx.Err() != nil {
			wire.PutBuffer(body)
			return fmt.Errorf("queue full: %w", context.Cause(ctx))
		}
		<-f.open
	}
	return f.fakeSender.Send(rank, typ, body, aux)
}

func (f *fullSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	return f.SendFrom(context.Background(), 0, rank, typ, body, aux)
}

// A decode engine whose queue is full must not hold the prefill engine's receive
// goroutine: HandleOutputs returns at once and the handoff finishes once there is
// room.
func TestPDHandoffNeverWaitsOnReceiveGoroutine(t *testing.T) {
	pre := newHarness(t, Config{MaxMigrations: -1}, 0)
	fs := &fullSender{fakeSender: newFakeSender(t), open: make(chan struct{})}
	d, err := New(Config{Registerer: prometheus.NewRegistry()}, fs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	d.EngineUp(0)
	if err := d.EnablePD(PDConfig{Prefill: pre.d, MinPromptTokens: 4}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Submit(context.Background(), longReq("x", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := pre.s.next(t, wire.RequestAdd)
	params := mustPack(t, map[string]any{"do_remote_prefill": true, "transfer_id": p.add.RequestID})
	done := make(chan struct{})
	go func() {
		pre.d.HandleOutputs(0, batch(0, prefillDone(p.add.RequestID, params)))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(fs.open)
		t.Fatal("the prefill engine's receive goroutine waited for a full decode queue")
	}
	if n := len(fs.sent(wire.RequestAdd)); n != 0 {
		t.Fatalf("%d decode ADDs written while the queue was full", n)
	}
	close(fs.open)
	dd := fs.next(t, wire.RequestAdd)
	if got := kvParams(t, dd.add); got["transfer_id"] != p.add.RequestID {
		t.Fatalf("decode kv_transfer_params = %v", got)
	}
	d.HandleOutputs(0, batch(0, finOut("x", wire.FinishLength, 7)))
	if _, err := recvAll(t, s); err != nil {
		t.Fatal(err)
	}
}

// echoSender is a prefill engine that answers a leg's ADD with its final output
// on another goroutine (the engine's receive goroutine) before Send returns, as
// a socket write that reaches an idle engine can: the leg's callback then runs
// while the submitter still holds the parent request's lock, and nothing the
// submitter does after the send may wait for the leg's lock (it did: SubmitFunc
// read the leg's rank under its lock, a lock-order inversion with the callback,
// which holds the leg's lock and waits for the parent's).
type echoSender struct {
	*fakeSender
	d *Dispatcher // the prefill dispatcher
}

func (s *echoSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	var add wire.EngineCoreRequest
	if typ == wire.RequestAdd {
		if err := wire.DecodeAdd([][]byte{body}, &add); err != nil {
			s.t.Error(err)
		}
	}
	if err := s.fakeSender.Send(rank, typ, body, aux); err != nil || typ != wire.RequestAdd {
		return err
	}
	delivered := make(chan struct{})
	go func() {
		close(delivered)
		params := wire.AppendPrefillKVParams(nil, add.RequestID)
		s.d.HandleOutputs(rank, batch(rank, prefillDone(add.RequestID, params)))
	}()
	<-delivered
	runtime.Gosched() // let the receive goroutine reach the leg's lock first
	return nil
}

func TestPDLegAnsweredBeforeSendReturns(t *testing.T) {
	es := &echoSender{fakeSender: newFakeSender(t)}
	pre, err := New(Config{Registerer: prometheus.NewRegistry(), MaxMigrations: -1}, es)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pre.Close() })
	es.d = pre
	pre.EngineUp(0)
	dec := newHarness(t, Config{}, 0)
	if err := dec.d.EnablePD(PDConfig{Prefill: pre, MinPromptTokens: 4}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		id := "r" + strconv.Itoa(i)
		done := make(chan error, 1)
		go func() {
			_, err := dec.d.SubmitFunc(longReq(id, 32), func(int, *wire.EngineCoreOutput, error) {})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			// Not t.Fatal: the cleanup's Close would wait on the deadlock for ever.
			panic(fmt.Sprintf("request %d: the submitter and the leg's callback deadlocked", i))
		}
		dd := dec.s.next(t, wire.RequestAdd)
		if got := kvParams(t, dd.add); got["transfer_id"] == nil {
			t.Fatalf("request %d: decode ADD without the prefill's kv_transfer_params: %v", i, got)
		}
		dec.d.HandleOutputs(0, batch(0, finOut(id, wire.FinishLength, 7)))
	}
}
