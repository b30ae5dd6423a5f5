package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u16bytes(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// Pooling outputs in every dtype vLLM's poolers hand back, and the hostile ones
// an engine could send: refused, never trusted beyond the bound.
func TestPoolingFloats(t *testing.T) {
	ok := []struct {
		name  string
		t     Tensor
		shape []int64
		want  []float32
	}{
		{"float32", Tensor{DType: "float32", Shape: []int64{3}, Data: f32bytes(0.5, -1, 3.25)}, []int64{3}, []float32{0.5, -1, 3.25}},
		{"numpy <f4", Tensor{DType: "<f4", Shape: []int64{1}, Data: f32bytes(2)}, []int64{1}, []float32{2}},
		// bfloat16 is float32's top half: 0x3f80 = 1, 0xc040 = -3, 0x3e80 = 0.25.
		{"bfloat16", Tensor{DType: "bfloat16", Shape: []int64{3}, Data: u16bytes(0x3f80, 0xc040, 0x3e80)}, []int64{3}, []float32{1, -3, 0.25}},
		// half: 0x3c00 = 1, 0xc200 = -3, 0x3400 = 0.25, 0x0001 = 2^-24 (subnormal), 0x7bff = 65504.
		{"float16", Tensor{DType: "float16", Shape: []int64{5}, Data: u16bytes(0x3c00, 0xc200, 0x3400, 0x0001, 0x7bff)}, []int64{5},
			[]float32{1, -3, 0.25, float32(math.Ldexp(1, -24)), 65504}},
		{"2-d", Tensor{DType: "float32", Shape: []int64{2, 2}, Data: f32bytes(1, 2, 3, 4)}, []int64{2, 2}, []float32{1, 2, 3, 4}},
		{"0-d", Tensor{DType: "float32", Shape: []int64{}, Data: f32bytes(7)}, []int64{}, []float32{7}},
		{"empty", Tensor{DType: "float32", Shape: []int64{0}}, []int64{0}, []float32{}},
	}
	for _, c := range ok {
		shape, data, err := PoolingFloats(&c.t, 16)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(shape) != len(c.shape) || len(data) != len(c.want) {
			t.Fatalf("%s: shape %v data %v", c.name, shape, data)
		}
		for i := range data {
			if data[i] != c.want[i] {
				t.Errorf("%s: [%d] = %v, want %v", c.name, i, data[i], c.want[i])
			}
		}
	}
	bad := []struct {
		name, field string
		t           *Tensor
	}{
		{"nil", "pooling_output", nil},
		{"int64", "pooling_output.dtype", &Tensor{DType: "int64", Shape: []int64{1}, Data: make([]byte, 8)}},
		{"float64", "pooling_output.dtype", &Tensor{DType: "float64", Shape: []int64{1}, Data: make([]byte, 8)}},
		{"3-d", "pooling_output.shape", &Tensor{DType: "float32", Shape: []int64{1, 1, 1}, Data: make([]byte, 4)}},
		{"above the bound", "pooling_output.shape", &Tensor{DType: "float32", Shape: []int64{17}, Data: make([]byte, 68)}},
		{"product above the bound", "pooling_output.shape", &Tensor{DType: "float32", Shape: []int64{5, 5}, Data: make([]byte, 100)}},
		{"huge shape, little data", "pooling_output.shape", &Tensor{DType: "float32", Shape: []int64{1 << 40, 1 << 40}, Data: make([]byte, 4)}},
		{"short data", "pooling_output.data", &Tensor{DType: "float32", Shape: []int64{3}, Data: make([]byte, 8)}},
		{"long data", "pooling_output.data", &Tensor{DType: "bfloat16", Shape: []int64{3}, Data: make([]byte, 8)}},
		{"negative dim", "pooling_output.shape", &Tensor{DType: "float32", Shape: []int64{-1}}},
	}
	for _, c := range bad {
		_, _, err := PoolingFloats(c.t, 16)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: err = %v, want a ValidationError on %s", c.name, err, c.field)
		}
	}
}

// Each release reads the params at its own positions: the task where its
// PoolingParams has it, the activation in the knob its frontend sets for the
// task, and nothing after the last field set (msgspec gives the rest defaults).
func TestPoolingParamsLayouts(t *testing.T) {
	p := &PoolingParams{Task: "embed", Dimensions: SomeInt(8), Activation: OptBool{Value: true, Valid: true}}
	for _, l := range BuiltinLayouts() {
		b, err := l.appendPooling(nil, p)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		r := &reader{b: b}
		n, err := r.arrayHeader()
		if err != nil {
			t.Fatal(err)
		}
		task := -1
		for i, f := range l.Pooling {
			if f.Name == "task" {
				task = i
			}
		}
		if n != task+1 {
			t.Errorf("%s: %d fields written, want %d (through task)", l.Name, n, task+1)
		}
		got, err := l.DecodePooling(b)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		if got.Task != "embed" || got.Dimensions != p.Dimensions || got.Activation != p.Activation {
			t.Errorf("%s: decoded %+v", l.Name, got)
		}
	}
}

func TestPoolingParamsRefused(t *testing.T) {
	v011, v018 := BuiltinLayout("v0.11"), BuiltinLayout("v0.18")
	cases := []struct {
		name string
		l    *Layout
		p    PoolingParams
	}{
		{"prefix-cache skip before the field existed", v011, PoolingParams{Task: "token_embed", SkipReadingPrefixCache: OptBool{Value: true, Valid: true}}},
		{"activation of a task without a knob", v011, PoolingParams{Task: "token_classify", Activation: OptBool{Value: true, Valid: true}}},
	}
	for _, c := range cases {
		q := &EngineCoreRequest{RequestID: "x", PromptTokenIDs: []int64{1}, Pooling: &c.p}
		var le *LayoutError
		if _, _, err := c.l.AppendAdd(nil, q); !errors.As(err, &le) {
			t.Errorf("%s: err = %v, want a LayoutError", c.name, err)
		}
	}
	// Harmless where the field is missing: false is what the release does anyway.
	q := &EngineCoreRequest{RequestID: "x", PromptTokenIDs: []int64{1}, Pooling: &PoolingParams{Task: "embed", SkipReadingPrefixCache: OptBool{Valid: true}}}
	if _, _, err := v011.AppendAdd(nil, q); err != nil {
		t.Errorf("skip false on v0.11: %v", err)
	}
	// No task, both params, none: refused before anything is written.
	for _, q := range []*EngineCoreRequest{
		{RequestID: "x", PromptTokenIDs: []int64{1}, Pooling: &PoolingParams{}},
		{RequestID: "x", PromptTokenIDs: []int64{1}, Pooling: &PoolingParams{Task: "embed"}, Sampling: &SamplingParams{}},
		{RequestID: "x", PromptTokenIDs: []int64{1}, Pooling: &PoolingParams{Task: "embed"}, PoolingParams: Raw{0x90}},
	} {
		if _, _, err := v018.AppendAdd(nil, q); err == nil {
			t.Errorf("%+v: encoded", q)
		}
		if err := q.Validate(); err == nil {
			t.Errorf("%+v: valid", q)
		}
	}
}

func FuzzPoolingFloats(f *testing.F) {
	f.Add("float32", int64(2), int64(-1), f32bytes(1, 2))
	f.Add("bfloat16", int64(2), int64(2), u16bytes(1, 2, 3, 4))
	f.Add("float16", int64(1<<40), int64(1<<40), u16bytes(0x7c00))
	f.Fuzz(func(t *testing.T, dtype string, d0, d1 int64, data []byte) {
		shape := []int64{d0}
		if d1 >= 0 {
			shape = append(shape, d1)
		}
		const bound = 1 << 12
		s, v, err := PoolingFloats(&Tensor{DType: dtype, Shape: shape, Data: data}, bound)
		if err != nil {
			return
		}
		n := int64(1)
		for _, d := range s {
			n *= d
		}
		if int64(len(v)) != n || len(v) > bound {
			t.Fatalf("shape %v gave %d values (bound %d)", s, len(v), bound)
		}
	})
}

func FuzzDecodePooling(f *testing.F) {
	for _, l := range BuiltinLayouts() {
		b, _ := l.appendPooling(nil, &PoolingParams{Task: "embed", Dimensions: SomeInt(4), ReturnedTokenIDs: []int64{1}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range BuiltinLayouts() {
			p, err := l.DecodePooling(b)
			if err != nil {
				continue
			}
			if _, err := l.appendPooling(nil, p); err != nil && p.Task != "" {
				var le *LayoutError
				if !errors.As(err, &le) {
					t.Fatalf("%s: decoded %+v does not encode: %v", l.Name, p, err)
				}
			}
		}
	})
}

// A built-in layout exported as a file and loaded back (--vllm-layout) keeps its
// PoolingParams and LoRARequest, so its engines still take pooling and adapter
// requests, each field where the built-in writes it.
func TestLayoutFileKeepsPoolingAndLoRA(t *testing.T) {
	for _, b := range BuiltinLayouts() {
		data, err := b.JSON()
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseLayout(data, b.Name+".json")
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if l.HasPooling() != b.HasPooling() || l.HasLoRA() != b.HasLoRA() {
			t.Fatalf("%s: pooling %v lora %v after the file, %v %v built in", b.Name, l.HasPooling(), l.HasLoRA(), b.HasPooling(), b.HasLoRA())
		}
		if !slices.Equal(fieldNames(l.Pooling), fieldNames(b.Pooling)) {
			t.Fatalf("%s: PoolingParams %v after the file, %v built in", b.Name, fieldNames(l.Pooling), fieldNames(b.Pooling))
		}
	}
}

func fieldNames(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}
