package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// poolEngines is one engine that answers pooling ADDs as the mock pooling model
// does (or as answer says, for hostile engines) and get_supported_tasks with tasks.
type poolEngines struct {
	d      *dispatcher.Dispatcher
	tasks  []string
	model  *mockengine.PoolingModel
	answer func(q *wire.EngineCoreRequest, p *wire.PoolingParams) *wire.Tensor
	mu     sync.Mutex
	seen   []*wire.EngineCoreRequest
	wg     sync.WaitGroup
}

func (f *poolEngines) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	switch typ {
	case wire.RequestAdd:
		var q wire.EngineCoreRequest
		if err := wire.DecodeAdd(append([][]byte{body}, aux...), &q); err != nil {
			panic(err)
		}
		p, err := wire.Native().DecodePooling(q.PoolingParams)
		if err != nil {
			panic(err)
		}
		q.Pooling = p
		f.mu.Lock()
		f.seen = append(f.seen, &q)
		f.mu.Unlock()
		t := f.answer(&q, p)
		out := wire.EngineCoreOutput{RequestID: q.RequestID, FinishReason: wire.FinishStop, PoolingOutput: t}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.d.HandleOutputs(rank, &wire.EngineCoreOutputs{Outputs: []wire.EngineCoreOutput{out}})
		}()
	case wire.RequestUtility:
		_, callID, _, _, _ := wire.DecodeUtility(body)
		res := []byte{0x90 | byte(len(f.tasks))}
		for _, t := range f.tasks {
			res = append(append(res, 0xa0|byte(len(t))), t...)
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.d.HandleOutputs(rank, &wire.EngineCoreOutputs{UtilityOutput: &wire.UtilityOutput{CallID: callID, HasResult: true, Result: res}})
		}()
	}
	return nil
}

// mockAnswer is the mock pooling model's tensor, in float32.
func (f *poolEngines) mockAnswer(q *wire.EngineCoreRequest, p *wire.PoolingParams) *wire.Tensor {
	shape, vals := f.model.PoolingValues(q.PromptTokenIDs, p)
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	}
	return &wire.Tensor{DType: "float32", Shape: shape, Data: b}
}

func newPoolAPI(t *testing.T, tasks ...string) (*poolEngines, http.Handler) {
	t.Helper()
	f := &poolEngines{tasks: tasks, model: &mockengine.PoolingModel{Tasks: tasks, Hidden: 8}}
	f.answer = f.mockAnswer
	d, err := dispatcher.New(dispatcher.Config{}, f)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	d.EngineUp(0)
	t.Cleanup(func() { d.Close(); testwait.Wait(t, &f.wg, "the fake pooling engines") })
	a := NewAPI(APIConfig{Dispatcher: d, Engines: func() []EngineView { return []EngineView{{Rank: 0, Ready: true}} },
		ContextLen: func(int) int64 { return 16 }})
	return f, a.Handler()
}

func postJSON(t *testing.T, h http.Handler, path, body string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	b, _ := io.ReadAll(w.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %s: %v", path, b, err)
	}
	return w.Code, m
}

// Token-id inputs, one ADD each, answered in input order with the model's values
// (vLLM's tolist() of the float32 tensor) and every prompt token counted.
func TestEmbeddingsValuesAndOrder(t *testing.T) {
	f, h := newPoolAPI(t, "embed", "token_embed")
	code, m := postJSON(t, h, "/v1/embeddings", `{"input": [[1,2,3],[4],[5,6]], "model": "switchyard"}`)
	if code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	data := m["data"].([]any)
	inputs := [][]int64{{1, 2, 3}, {4}, {5, 6}}
	for i, ids := range inputs {
		_, want := f.model.PoolingValues(ids, &wire.PoolingParams{Task: "embed"})
		item := data[i].(map[string]any)
		got := item["embedding"].([]any)
		if item["index"] != float64(i) || item["object"] != "embedding" || len(got) != len(want) {
			t.Fatalf("item %d: %v", i, item)
		}
		for j := range want {
			if got[j].(float64) != float64(float32(want[j])) {
				t.Fatalf("item %d [%d] = %v, want %v", i, j, got[j], float32(want[j]))
			}
		}
	}
	u := m["usage"].(map[string]any)
	if u["prompt_tokens"] != float64(6) || u["total_tokens"] != float64(6) || m["object"] != "list" || !strings.HasPrefix(m["id"].(string), "embd-") {
		t.Fatalf("answer %v", m)
	}
	for _, q := range f.seen {
		if q.Pooling.Task != "embed" || !q.Pooling.Activation.Valid || !q.Pooling.Activation.Value || q.Sampling != nil {
			t.Fatalf("ADD %+v: pooling %+v", q, q.Pooling)
		}
	}
}

// base64 in each embed_dtype and endianness decodes to the float answer rounded
// to that dtype, as vLLM's tensor2binary writes it.
func TestEmbeddingsBase64(t *testing.T) {
	_, h := newPoolAPI(t, "embed")
	_, plain := postJSON(t, h, "/v1/embeddings", `{"input": [9,8,7]}`)
	want := plain["data"].([]any)[0].(map[string]any)["embedding"].([]any)
	for _, c := range []struct {
		dtype, endian string
		size          int
	}{{"float32", "native", 4}, {"float32", "big", 4}, {"float16", "little", 2}, {"bfloat16", "big", 2}} {
		_, m := postJSON(t, h, "/v1/embeddings", `{"input": [9,8,7], "encoding_format": "base64", "embed_dtype": "`+c.dtype+`", "endianness": "`+c.endian+`"}`)
		b, err := base64.StdEncoding.DecodeString(m["data"].([]any)[0].(map[string]any)["embedding"].(string))
		if err != nil || len(b) != c.size*len(want) {
			t.Fatalf("%s: %d bytes (%v)", c.dtype, len(b), err)
		}
		var order binary.ByteOrder = binary.LittleEndian
		if c.endian == "big" {
			order = binary.BigEndian
		}
		for i, w := range want {
			var got float64
			switch c.dtype {
			case "float32":
				got = float64(math.Float32frombits(order.Uint32(b[4*i:])))
			case "bfloat16":
				got = float64(math.Float32frombits(uint32(order.Uint16(b[2*i:])) << 16))
			default:
				h := order.Uint16(b[2*i:])
				got = float64(math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h>>10&0x1f)+112)<<23 | uint32(h&0x3ff)<<13))
			}
			if math.Abs(got-w.(float64)) > 4e-3 {
				t.Fatalf("%s %s [%d] = %v, want about %v", c.dtype, c.endian, i, got, w)
			}
		}
	}
}

// What vLLM refuses, with its texts, before anything reaches an engine.
func TestPoolingRefusals(t *testing.T) {
	f, h := newPoolAPI(t, "embed")
	for _, c := range []struct{ path, body, msg string }{
		{"/v1/embeddings", `{"input": []}`, "input must not be empty"},
		{"/v1/embeddings", `{"input": [1], "normalize": true}`, "Parameter `normalize` was removed; use `use_activation` instead."},
		{"/v1/embeddings", `{"input": [1], "encoding_format": "bytes"}`, "encoding_format"},
		{"/v1/embeddings", `{"input": [1], "dimensions": 0}`, "Dimensions must be greater than 0"},
		{"/v1/embeddings", `{"input": [1], "dimensions": 1000000000000000}`, "dimensions is 1000000000000000, more than the limit of 16777216"},
		{"/v1/embeddings", `{"input": [1], "truncate_prompt_tokens": 17}`, "truncate_prompt_tokens value (17) is greater than max_model_len (16). Please, select a smaller truncation size."},
		{"/v1/embeddings", `{"input": "text"}`, "text needs a tokenizer"},
		{"/v1/embeddings", `{"input": [-1]}`, "non-negative"},
		{"/pooling", `{"input": [1], "task": "classify"}`, "Unsupported task: 'classify' Supported tasks: ('embed',)"},
		{"/pooling", `{"input": [1], "dimensions": 4}`, "dimensions is currently not supported"},
	} {
		code, m := postJSON(t, h, c.path, c.body)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s: %d %q, want 400 with %q", c.path, c.body, code, msg, c.msg)
		}
	}
	if len(f.seen) != 0 {
		t.Fatalf("%d ADDs sent", len(f.seen))
	}
	_, h2 := newPoolAPI(t, "classify")
	code, m := postJSON(t, h2, "/v1/embeddings", `{"input": [1]}`)
	if code != 400 || m["error"].(map[string]any)["message"] != "The model does not support Embeddings API" {
		t.Fatalf("%d %v", code, m)
	}
}

// truncate_prompt_tokens keeps the last k ids (or the first, truncation_side
// right), and the usage counts what was sent.
func TestEmbeddingsTruncation(t *testing.T) {
	f, h := newPoolAPI(t, "embed")
	code, m := postJSON(t, h, "/v1/embeddings", `{"input": [1,2,3,4,5], "truncate_prompt_tokens": 2}`)
	if code != 200 || m["usage"].(map[string]any)["prompt_tokens"] != float64(2) {
		t.Fatalf("%d %v", code, m)
	}
	postJSON(t, h, "/v1/embeddings", `{"input": [1,2,3,4,5], "truncate_prompt_tokens": 2, "truncation_side": "right"}`)
	if a, b := f.seen[0].PromptTokenIDs, f.seen[1].PromptTokenIDs; !slicesEqual(a, []int64{4, 5}) || !slicesEqual(b, []int64{1, 2}) {
		t.Fatalf("engines saw %v and %v", a, b)
	}
}

func slicesEqual(a, b []int64) bool { return bytes.Equal(i64bytes(a), i64bytes(b)) }

func i64bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// A hostile engine's tensor is refused (500), never passed on: another dtype, a
// shape above the bound or beyond its data, NaN, or more dimensions than asked.
func TestPoolingHostileEngine(t *testing.T) {
	for _, c := range []struct {
		name, body string
		t          *wire.Tensor
	}{
		{"int64", `{"input": [1]}`, &wire.Tensor{DType: "int64", Shape: []int64{1}, Data: make([]byte, 8)}},
		{"huge shape", `{"input": [1]}`, &wire.Tensor{DType: "float32", Shape: []int64{1 << 30, 1 << 30}, Data: make([]byte, 4)}},
		{"short data", `{"input": [1]}`, &wire.Tensor{DType: "float32", Shape: []int64{4}, Data: make([]byte, 4)}},
		{"NaN", `{"input": [1]}`, &wire.Tensor{DType: "float32", Shape: []int64{1}, Data: []byte{0, 0, 0xc0, 0x7f}}},
		{"more than the dimensions asked", `{"input": [1], "dimensions": 2}`, &wire.Tensor{DType: "float32", Shape: []int64{3}, Data: make([]byte, 12)}},
		{"none", `{"input": [1]}`, nil},
		{"rows for a sequence task", `{"input": [1]}`, &wire.Tensor{DType: "float32", Shape: []int64{1, 2}, Data: make([]byte, 8)}},
	} {
		f, h := newPoolAPI(t, "embed")
		tensor := c.t
		f.answer = func(*wire.EngineCoreRequest, *wire.PoolingParams) *wire.Tensor { return tensor }
		code, m := postJSON(t, h, "/v1/embeddings", c.body)
		if code != 500 || m["data"] != nil {
			t.Errorf("%s: %d %v", c.name, code, m)
		}
	}
}

// /pooling answers the model's first task by default; a token task nests one
// row per prompt token.
func TestPoolingEndpoint(t *testing.T) {
	f, h := newPoolAPI(t, "embed", "token_embed")
	code, m := postJSON(t, h, "/pooling", `{"input": [1,2,3]}`)
	if code != 200 || f.seen[0].Pooling.Task != "embed" || m["data"].([]any)[0].(map[string]any)["object"] != "pooling" {
		t.Fatalf("%d %v", code, m)
	}
	code, m = postJSON(t, h, "/pooling", `{"input": [1,2,3], "task": "token_embed"}`)
	rows := m["data"].([]any)[0].(map[string]any)["data"].([]any)
	if code != 200 || len(rows) != 3 || len(rows[0].([]any)) != 8 || !f.seen[1].Pooling.SkipReadingPrefixCache.Value {
		t.Fatalf("%d %v", code, m)
	}
}

// The cost of one /v1/embeddings request of 4 token-id inputs through the
// handler, the dispatcher and the wire codecs (engines answered in process).
func BenchmarkEmbeddings(b *testing.B) {
	f := &poolEngines{tasks: []string{"embed"}, model: &mockengine.PoolingModel{Hidden: 768}}
	f.answer = f.mockAnswer
	d, err := dispatcher.New(dispatcher.Config{}, f)
	if err != nil {
		b.Fatal(err)
	}
	f.d = d
	d.EngineUp(0)
	defer func() { d.Close(); testwait.Wait(b, &f.wg, "the fake pooling engines") }()
	h := NewAPI(APIConfig{Dispatcher: d, Engines: func() []EngineView { return []EngineView{{Rank: 0, Ready: true}} }}).Handler()
	body := `{"input": [[1,2,3,4,5,6,7,8],[9,10,11,12],[13,14],[15,16,17]]}`
	b.ReportAllocs()
	for b.Loop() {
		f.mu.Lock()
		f.seen = f.seen[:0]
		f.mu.Unlock()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(body)))
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// The answer is named by X-Request-Id, else the body's request_id, with the
// endpoint's prefix, as vLLM names it; the engine ids stay unique.
func TestEmbeddingsRequestID(t *testing.T) {
	f, h := newPoolAPI(t, "embed")
	_, m := postJSON(t, h, "/v1/embeddings", `{"input": [1], "request_id": "mine"}`)
	if m["id"] != "embd-mine" || !strings.HasPrefix(f.seen[0].RequestID, "mine-") {
		t.Fatalf("id %v, engine id %s", m["id"], f.seen[0].RequestID)
	}
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(`{"input": [1], "request_id": "mine"}`))
	req.Header.Set(RequestIDHeader, "hdr")
	h.ServeHTTP(w, req)
	var got map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if got["id"] != "embd-hdr" || f.seen[1].RequestID == f.seen[0].RequestID {
		t.Fatalf("id %v, engine ids %s %s", got["id"], f.seen[0].RequestID, f.seen[1].RequestID)
	}
}

// /classify (and /score) are named by X-Request-Id only, as vLLM's classification
// serving names them; the body's request_id leads the engine ids. An X-Request-Id
// over the bound is refused before any engine request.
func TestClassifyRequestID(t *testing.T) {
	f, h := newPoolAPI(t, "classify")
	post := func(hdr string) (int, map[string]any) {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/classify", strings.NewReader(`{"input": [1, 2], "request_id": "mine"}`))
		if hdr != "" {
			req.Header.Set(RequestIDHeader, hdr)
		}
		h.ServeHTTP(w, req)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	code, m := post("")
	id, _ := m["id"].(string)
	if code != http.StatusOK || !strings.HasPrefix(id, "classify-") || id == "classify-mine" || !strings.HasPrefix(f.seen[0].RequestID, "mine-") {
		t.Fatalf("%d id %v, engine id %s", code, m["id"], f.seen[0].RequestID)
	}
	if code, m = post("hdr"); code != http.StatusOK || m["id"] != "classify-hdr" {
		t.Fatalf("%d id %v", code, m["id"])
	}
	sent := len(f.seen)
	if code, _ = post(strings.Repeat("x", apicore.MaxRequestIDLen+1)); code != http.StatusBadRequest || len(f.seen) != sent {
		t.Fatalf("%d, %d engine requests after %d", code, len(f.seen), sent)
	}
}
