package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Every ADD of one client-protocol connection is submitted as one client of
// the fair share, and another connection as another: a burst from one then
// waits for room behind itself. Each ADD used to be a client of its own.
func TestClientProtocolFairShareKey(t *testing.T) {
	h := newClientHarness(t, clientapi.ClientConfig{})
	h.add(t, "r1", 1, wire.OptInt{})
	k1 := h.f.NextKey(t)
	h.nextOutputs(t)
	h.add(t, "r2", 1, wire.OptInt{})
	k2 := h.f.NextKey(t)
	h.nextOutputs(t)
	if k1 != k2 {
		t.Fatalf("two ADDs of one connection were submitted as clients %#x and %#x", k1, k2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	other, err := transport.Dial(ctx, transport.Dealer, h.cs.Addr(), transport.Options{Identity: []byte("client-2")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1)
	sp.IgnoreEOS = true
	body, _, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: "o1", PromptTokenIDs: []int64{1}, Sampling: &sp})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Send([]byte{wire.RequestAdd}, body); err != nil {
		t.Fatal(err)
	}
	if k3 := h.f.NextKey(t); k3 == k1 || k3&(1<<63) != 0 {
		t.Fatalf("second connection submitted as client %#x (first %#x)", k3, k1)
	}
}

// HTTP requests from one host share one client key, apart from the client
// protocol's and the dispatcher's anonymous ones.
func TestHTTPFairShareKey(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	var keys []uint64
	for range 2 {
		if resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 1}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		keys = append(keys, f.NextKey(t))
	}
	if keys[0] != keys[1] || keys[0]&(1<<62) == 0 || keys[0]&(1<<63) != 0 {
		t.Fatalf("keys of two requests from one host: %#x %#x", keys[0], keys[1])
	}
}

// apiErrorOf decodes the JSON error shape.
func apiErrorOf(t *testing.T, body []byte) ErrorDetail {
	t.Helper()
	var e ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not the JSON error shape: %v: %s", err, body)
	}
	return e.Error
}

// A send queue that stayed full for the send wait is a busy engine: 503 with
// Retry-After, and EngineBusy on the client protocol. It used to be a 500.
func TestBusyEngineIs503(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	var busy error = &frontend.QueueFullError{Rank: 0, Queued: 1024, Cause: frontend.ErrSendWait}
	f.Refuse.Store(&busy)
	resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 1}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("busy engine: %d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if e := apiErrorOf(t, body); e.Type != TypeServiceUnavailable || e.Code != 503 {
		t.Fatalf("error body %+v", e)
	}

	h := newClientHarnessOn(t, f, clientapi.ClientConfig{})
	h.add(t, "b1", 1, wire.OptInt{})
	if e := h.nextError(t); e["type"] != clientapi.ErrTypeEngineBusy || e["request_id"] != "b1" {
		t.Fatalf("client protocol: %v", e)
	}
}

// A request failed because its engine stalled is a 503 with Retry-After, and
// EngineStalled on the client protocol. It used to be a 500.
func TestStalledEngineIs503(t *testing.T) {
	f := newFakeCoreConfig(t, 1, dispatcher.Config{StallTimeout: time.Hour})
	f.Hold.Store(true)
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return nil },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}})
	ts := newServer(t, api.Handler())
	type answer struct {
		resp *http.Response
		body []byte
	}
	got := make(chan answer, 1)
	go func() {
		resp, body := postNoFatal(ts, `{"prompt": [1, 2], "max_tokens": 5}`)
		got <- answer{resp, body}
	}()
	testwait.Recv(t, f.Adds, "the HTTP request's ADD")
	h := newClientHarnessOn(t, f, clientapi.ClientConfig{})
	h.add(t, "s1", 5, wire.OptInt{})
	testwait.Recv(t, f.Adds, "s1's ADD")
	h.nextOutputs(t) // its first token
	if ranks := f.D.CheckStalls(time.Now().Add(2 * time.Hour)); len(ranks) != 1 {
		t.Fatalf("stalled ranks %v", ranks)
	}
	a := testwait.Recv(t, got, "the HTTP answer")
	if a.resp == nil || a.resp.StatusCode != http.StatusServiceUnavailable || a.resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("stalled engine: %+v %s", a.resp, a.body)
	}
	if e := apiErrorOf(t, a.body); e.Type != TypeServiceUnavailable {
		t.Fatalf("error body %+v", e)
	}
	for {
		m := h.next(t)
		if m[0][0]&0xf0 != 0x80 {
			continue // the synthesised final output
		}
		if e := h.decodeError(t, m); e["type"] != clientapi.ErrTypeEngineStalled || e["request_id"] != "s1" {
			t.Fatalf("client protocol: %v", e)
		}
		return
	}
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// postNoFatal posts a completion from any goroutine; resp is nil on error.
func postNoFatal(ts *httptest.Server, body string) (*http.Response, []byte) {
	resp, err := testwait.HTTPClient.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
