package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// countingTok is fakeTextTok that counts Encode calls, knows its longest token
// (MaxTokenBytes), and with gate set blocks each Encode until the gate closes.
type countingTok struct {
	fakeTextTok
	perToken int
	encodes  atomic.Int64
	entered  chan struct{}
	gate     chan struct{}
}

func (c *countingTok) MaxTokenBytesOf(string) int { return c.perToken }
func (c *countingTok) Encode(text string, addSpecial bool) []int64 {
	c.encodes.Add(1)
	if c.gate != nil {
		c.entered <- struct{}{}
		select {
		case <-c.gate:
		case <-time.After(testwait.Deadline):
		}
	}
	return c.fakeTextTok.Encode(text, addSpecial)
}

func newCapAPI(t *testing.T, tok *countingTok, maxConcurrent int) *httptest.Server {
	t.Helper()
	f := newFakeCore(t, 1)
	reg := prometheus.NewRegistry()
	api := NewAPI(APIConfig{
		Dispatcher: f.D,
		Engines:    func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model:      apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Registerer: reg, Gatherer: reg,
		MaxConcurrentRequests: maxConcurrent,
		Text: &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096, Tokenizer: tok,
			Template: fakeTemplate{format: "string"}},
	})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// A text longer than max_model_len times the longest token is refused with the
// 400 of a prompt over the context, and the tokenizer never sees it (it used to
// encode all of it first: tens of seconds for 16 MiB).
func TestTextOverContextRefusedBeforeTokenizing(t *testing.T) {
	tok := &countingTok{perToken: 4}
	ts := newCapAPI(t, tok, 0)
	// Completions read a prompt up to --max-body-bytes, the other endpoints a field
	// up to 1 MiB.
	huge := `"` + strings.Repeat("a", 16<<20-4096) + `"`
	big := `"` + strings.Repeat("a", 1<<20-4096) + `"`
	msgs := `[{"role": "user", "content": ` + big + `}]`
	for _, c := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt": ` + huge + `}`, "prompt"},
		{"/v1/completions", `{"prompt": ["short", ` + big + `]}`, "prompt"},
		{"/v1/chat/completions", `{"messages": ` + msgs + `}`, "messages"},
		{"/tokenize", `{"prompt": ` + big + `}`, "prompt"},
		{"/tokenize", `{"messages": ` + msgs + `}`, "messages"},
	} {
		start := time.Now()
		status, body := postPath(t, ts, c.path, c.body)
		t.Logf("%s %d bytes: %d in %v", c.path, len(c.body), status, time.Since(start))
		var e struct {
			Error APIError `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if status != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, "longer than the maximum model length of 4096") {
			t.Errorf("%s %.40s: %d %.300s", c.path, c.body, status, body)
		}
	}
	if n := tok.encodes.Load(); n != 0 {
		t.Errorf("the tokenizer encoded %d over-long texts", n)
	}
	// At the bound the text may still fit: it is tokenized.
	if status, body := postPath(t, ts, "/tokenize", `{"prompt": "`+strings.Repeat("a", 4096*4)+`", "add_special_tokens": false}`); status != 200 {
		t.Errorf("text at the bound: %d %.200s", status, body)
	}
	if n := tok.encodes.Load(); n != 1 {
		t.Errorf("text at the bound: %d encodes, want 1", n)
	}
}

// /tokenize and /detokenize take a --max-concurrent-requests slot as generation
// does, and a tokenization in progress holds it: beyond the limit every text
// endpoint is the same 503.
func TestTokenizeTakesConcurrencySlot(t *testing.T) {
	tok := &countingTok{perToken: 4, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	ts := newCapAPI(t, tok, 1)
	first := make(chan int, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post(ts.URL+"/tokenize", "application/json", strings.NewReader(`{"prompt": "hello"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	testwait.Recv(t, tok.entered, "the first tokenization")
	for _, c := range []struct{ path, body string }{
		{"/tokenize", `{"prompt": "hello"}`},
		{"/detokenize", `{"tokens": [1, 2]}`},
		{"/v1/completions", `{"prompt": "hello"}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`},
	} {
		status, body := postPath(t, ts, c.path, c.body)
		if status != 503 || !strings.Contains(string(body), "--max-concurrent-requests") {
			t.Errorf("%s while a tokenization holds the slot: %d %.200s", c.path, status, body)
		}
	}
	close(tok.gate)
	if status := testwait.Recv(t, first, "the first tokenization's answer"); status != 200 {
		t.Errorf("first /tokenize: %d", status)
	}
	// The slot is freed just after the answer is written: retry briefly.
	for i := 0; ; i++ {
		status, body := postPath(t, ts, "/detokenize", `{"tokens": [1, 2]}`)
		if status == 200 {
			break
		}
		if i == 100 {
			t.Fatalf("/detokenize with the slot free: %d %.200s", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
