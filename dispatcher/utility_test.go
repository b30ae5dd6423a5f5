package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
	"github.com/vmihailenco/msgpack/v5"
)

type utilityReply struct {
	res UtilityResults
	err error
}

func callAsync(h *harness, ctx context.Context, method string, args ...any) <-chan utilityReply {
	ch := make(chan utilityReply, 1)
	go func() {
		res, err := h.d.CallUtility(ctx, method, args...)
		ch <- utilityReply{res, err}
	}()
	return ch
}

func answer(t testing.TB, h *harness, fr sentFrame, v any) {
	t.Helper()
	raw, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	h.d.HandleOutputs(fr.rank, &wire.EngineCoreOutputs{EngineIndex: int64(fr.rank),
		UtilityOutput: &wire.UtilityOutput{CallID: fr.callID, HasResult: true, Result: raw}})
}

func answerFailure(h *harness, fr sentFrame, msg string) {
	h.d.HandleOutputs(fr.rank, &wire.EngineCoreOutputs{EngineIndex: int64(fr.rank),
		UtilityOutput: &wire.UtilityOutput{CallID: fr.callID, Failure: wire.SomeString(msg)}})
}

func TestUtilityFansOutAndAgrees(t *testing.T) {
	h := newHarness(t, Config{ClientIndex: 2}, 0, 1, 2)
	reply := callAsync(h, context.Background(), "is_sleeping")
	var frames []sentFrame
	for range 3 {
		frames = append(frames, h.s.next(t, wire.RequestUtility))
	}
	var ids []uint64
	ranks := map[int]bool{}
	for _, fr := range frames {
		if fr.method != "is_sleeping" || fr.clientIndex != 2 || !cmp.Equal([]byte(fr.args), []byte{0x90}) {
			t.Errorf("UTILITY payload: method %q client %d args % x", fr.method, fr.clientIndex, fr.args)
		}
		ids = append(ids, fr.callID)
		ranks[fr.rank] = true
	}
	if !cmp.Equal(ids, []uint64{1, 2, 3}) || len(ranks) != 3 {
		t.Errorf("call ids %v to ranks %v; want 1, 2, 3 to every engine", ids, ranks)
	}
	// Engine pushes (-1, -2) and ids we never issued are ignored.
	h.d.HandleOutputs(0, &wire.EngineCoreOutputs{UtilityOutput: &wire.UtilityOutput{CallID: ^uint64(0), CallIDNegative: true, HasResult: true, Result: []byte{0xc3}}})
	h.d.HandleOutputs(0, &wire.EngineCoreOutputs{UtilityOutput: &wire.UtilityOutput{CallID: 999, HasResult: true, Result: []byte{0xc3}}})
	for _, fr := range frames {
		answer(t, h, fr, false)
	}
	r := testwait.Recv(t, reply, "the utility call's reply")
	if r.err != nil {
		t.Fatal(r.err)
	}
	v, err := r.res.Consensus()
	if err != nil || v != false {
		t.Errorf("Consensus = %v, %v", v, err)
	}
	if len(r.res.Results) != 3 || h.d.util.pending() != 0 {
		t.Errorf("%d results, %d still pending", len(r.res.Results), h.d.util.pending())
	}
}

func TestUtilityArgsAndDisagreement(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	reply := callAsync(h, context.Background(), "reset_prefix_cache", false, false)
	a, b := h.s.next(t, wire.RequestUtility), h.s.next(t, wire.RequestUtility)
	if !cmp.Equal([]byte(a.args), []byte{0x92, 0xc2, 0xc2}) {
		t.Errorf("args % x, want [false, false]", a.args)
	}
	answer(t, h, a, true)
	answer(t, h, b, false)
	r := testwait.Recv(t, reply, "the utility call's reply")
	if r.err != nil {
		t.Fatal(r.err)
	}
	_, err := r.res.Consensus()
	var inc *InconsistentUtilityResults
	if !errors.As(err, &inc) || inc.Method != "reset_prefix_cache" || len(inc.Values) != 2 {
		t.Fatalf("Consensus: %v", err)
	}
	if want := `utility call "reset_prefix_cache": engines disagree: rank 0 = true, rank 1 = false`; err.Error() != want &&
		err.Error() != `utility call "reset_prefix_cache": engines disagree: rank 0 = false, rank 1 = true` {
		t.Errorf("message %q", err.Error())
	}
}

func TestUtilityWaitsForAllBeforeFailing(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	reply := callAsync(h, context.Background(), "sleep", 1)
	a, b := h.s.next(t, wire.RequestUtility), h.s.next(t, wire.RequestUtility)
	answerFailure(h, a, "Call to sleep method failed: boom")
	select {
	case r := <-reply:
		t.Fatalf("returned before every engine answered: %v", r.err)
	default:
	}
	answer(t, h, b, nil)
	r := testwait.Recv(t, reply, "the utility call's reply")
	var ce *UtilityCallError
	if !errors.As(r.err, &ce) || ce.Rank != a.rank || ce.Msg != "Call to sleep method failed: boom" {
		t.Fatalf("err %v", r.err)
	}
	if _, err := r.res.Consensus(); !errors.As(err, &ce) {
		t.Errorf("Consensus with a failed engine: %v", err)
	}
}

func TestUtilityTimeoutNamesMissingRanks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{UtilityTimeout: 5 * time.Second}, 0, 1, 2)
		defer h.d.Close()
		reply := callAsync(h, context.Background(), "is_sleeping")
		synctest.Wait()
		for _, fr := range h.s.sent(wire.RequestUtility) {
			if fr.rank != 1 {
				answer(t, h, fr, false)
			}
		}
		r := testwait.Recv(t, reply, "the utility call's reply") // the fake clock jumps to the 5s timeout once everyone is blocked
		var te *UtilityTimeoutError
		if !errors.As(r.err, &te) || !cmp.Equal(te.MissingRanks, []int{1}) {
			t.Fatalf("err %v", r.err)
		}
		if want := `utility call "is_sleeping" timed out after 5s; no reply from ranks [1]`; r.err.Error() != want {
			t.Errorf("message %q, want %q", r.err.Error(), want)
		}
		if len(r.res.Results) != 2 || h.d.util.pending() != 0 {
			t.Errorf("%d results, %d pending", len(r.res.Results), h.d.util.pending())
		}
	})
}

func TestUtilityCancelUnregisters(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	reply := callAsync(h, ctx, "is_sleeping")
	fr := h.s.next(t, wire.RequestUtility)
	h.s.next(t, wire.RequestUtility)
	cancel()
	if r := testwait.Recv(t, reply, "the utility call's reply"); !errors.Is(r.err, context.Canceled) {
		t.Errorf("err %v", r.err)
	}
	if n := h.d.util.pending(); n != 0 {
		t.Errorf("%d call ids still pending", n)
	}
	answer(t, h, fr, true) // a late reply is ignored
}

func TestUtilityEngineDownAndSendFailure(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1, 2)
	h.s.setFail(2, errors.New("stuck"))
	reply := callAsync(h, context.Background(), "is_sleeping")
	a := h.s.next(t, wire.RequestUtility)
	b := h.s.next(t, wire.RequestUtility)
	if a.rank != 0 {
		a, b = b, a
	}
	answer(t, h, a, false)
	h.d.EngineDown(b.rank, errors.New("ENGINE_CORE_DEAD"))
	r := testwait.Recv(t, reply, "the utility call's reply")
	var down *EngineDownError
	if !errors.As(r.err, &down) || down.Rank != 1 {
		t.Errorf("err %v, want rank 1 down among the failures", r.err)
	}
	if len(r.res.Results) != 3 || r.res.Results[0].Err != nil || r.res.Results[2].Err == nil {
		t.Errorf("results %+v", r.res.Results)
	}
}

func TestUtilityNoEngines(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.d.CallUtility(context.Background(), "is_sleeping"); !errors.Is(err, ErrNoEngines) {
		t.Errorf("err %v", err)
	}
	if _, err := (UtilityResults{}).Consensus(); !errors.Is(err, ErrNoEngines) {
		t.Errorf("empty Consensus: %v", err)
	}
}

// An engine's utility result nested deeper than wire.MaxMsgpackDepth is that
// rank's error, checked before the reflection decoder (which recurses once per
// level with no bound) walks it; it used to be decoded whatever its depth.
func TestUtilityDeepResultRefused(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	reply := callAsync(h, context.Background(), "is_sleeping")
	fr := h.s.next(t, wire.RequestUtility)
	deep := append(bytes.Repeat([]byte{0x91}, wire.MaxMsgpackDepth+1), 0xc0)
	h.d.HandleOutputs(fr.rank, &wire.EngineCoreOutputs{EngineIndex: int64(fr.rank),
		UtilityOutput: &wire.UtilityOutput{CallID: fr.callID, HasResult: true, Result: deep}})
	r := testwait.Recv(t, reply, "the utility call's reply")
	var ue *UtilityCallError
	if !errors.As(r.err, &ue) || !errors.Is(r.err, wire.ErrMsgpackTooDeep) || r.res.Results[0].Value != nil {
		t.Fatalf("deep result: %v %+v", r.err, r.res)
	}
}
