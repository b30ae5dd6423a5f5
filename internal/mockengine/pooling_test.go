package mockengine

import (
	"math"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// A pooling request ends in its first step with one tensor and no tokens, finish
// STOP; a task the model does not serve ends with ERROR, as vLLM's add_request
// refuses it.
func TestSchedulerPooling(t *testing.T) {
	s := NewScheduler(1, 0, 0)
	s.Pooling = &PoolingModel{Tasks: []string{"embed", "classify"}, Hidden: 4, Labels: 3}
	add := func(id, task string) {
		if err := s.Add(&wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{5, 6}, Pooling: &wire.PoolingParams{Task: task}}); err != nil {
			t.Fatal(err)
		}
	}
	add("e", "embed")
	add("c", "classify")
	add("x", "score")
	outs := s.Step(nil)
	if len(outs) != 3 || !s.Idle() {
		t.Fatalf("%d outputs, idle %v", len(outs), s.Idle())
	}
	for _, o := range outs {
		switch o.RequestID {
		case "x":
			if o.FinishReason != wire.FinishError || o.PoolingOutput != nil {
				t.Errorf("unserved task: %+v", o)
			}
			continue
		case "e", "c":
			if o.FinishReason != wire.FinishStop || len(o.NewTokenIDs) != 0 {
				t.Errorf("%s: %+v", o.RequestID, o)
			}
		}
		shape, vals, err := wire.PoolingFloats(o.PoolingOutput, 64)
		if err != nil {
			t.Fatal(err)
		}
		var sum, sq float64
		for _, v := range vals {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		switch o.RequestID {
		case "e": // L2-normalised by default
			if shape[0] != 4 || math.Abs(sq-1) > 1e-5 {
				t.Errorf("embed: shape %v, norm² %v", shape, sq)
			}
		case "c": // softmax
			if shape[0] != 3 || math.Abs(sum-1) > 1e-5 {
				t.Errorf("classify: shape %v, sum %v", shape, sum)
			}
		}
	}
}

// The values depend on the prompt only, and dimensions and dtype shape them.
func TestPoolingValues(t *testing.T) {
	m := &PoolingModel{Hidden: 16}
	_, a := m.PoolingValues([]int64{1, 2}, &wire.PoolingParams{Task: "embed"})
	_, b := m.PoolingValues([]int64{1, 2}, &wire.PoolingParams{Task: "embed"})
	_, c := m.PoolingValues([]int64{2, 1}, &wire.PoolingParams{Task: "embed"})
	if a[0] != b[0] || a[0] == c[0] {
		t.Fatalf("not a function of the prompt: %v %v %v", a[0], b[0], c[0])
	}
	shape, d := m.PoolingValues([]int64{1, 2}, &wire.PoolingParams{Task: "embed", Dimensions: wire.SomeInt(3)})
	if shape[0] != 3 || len(d) != 3 {
		t.Fatalf("dimensions 3: %v", shape)
	}
	shape, _ = m.PoolingValues([]int64{1, 2, 3}, &wire.PoolingParams{Task: "token_embed"})
	if len(shape) != 2 || shape[0] != 3 || shape[1] != 16 {
		t.Fatalf("token_embed shape %v", shape)
	}
	for _, dt := range []string{"float16", "bfloat16"} {
		vals := []float64{0.5, -0.25, 0.1}
		_, f, err := wire.PoolingFloats(&wire.Tensor{DType: dt, Shape: []int64{3}, Data: encodeFloats(vals, dt)}, 8)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			if math.Abs(float64(f[i])-vals[i]) > 4e-3 {
				t.Errorf("%s [%d] = %v, want about %v", dt, i, f[i], vals[i])
			}
		}
	}
}
