package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

var timeNow = time.Now

// cpuTime is the process's user+system CPU time: on a loaded shared machine wall
// time per op mostly measures the neighbours, CPU time what the work costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs body b.N times and reports the process CPU per op.
func loopCPU(b *testing.B, body func()) {
	b.ReportAllocs()
	start := cpuTime()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
}

// benchText is the text model of the benchmarks: the real qwen3 tokenizer when
// the models cache has it, else the embedded one.
func benchText(b *testing.B) *Text {
	b.Helper()
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".cache", "switchyard", "models", "qwen3")
	if root := os.Getenv("SWITCHYARD_MODELS"); root != "" {
		dir = filepath.Join(root, "qwen3")
	}
	if t, _, err := LoadText(dir, "", ""); err == nil {
		return t
	}
	t, err := LoadEmbeddedText("switchyard")
	if err != nil {
		b.Fatal(err)
	}
	t.TokenCompat = false
	return t
}

// BenchmarkStreamedRequest is the cost of one streamed request of a 1,000-token
// prompt and 256 output tokens through the HTTP API (fake engines, no sockets
// below the dispatcher): in token ids, and as a text chat (template, tokenizer,
// detokenizer, chat chunks). The difference is what text adds.
func BenchmarkStreamedRequest(b *testing.B) {
	text := benchText(b)
	// A user message that renders to about 1,000 tokens.
	words := strings.Repeat("the quick brown fox jumps over the lazy dog ", 110)
	chatBody := `{"messages": [{"role": "user", "content": ` + quoteJSON(words) + `}], "max_tokens": 256, "stream": true}`
	in, _ := (&ChatRequest{Messages: json.RawMessage(`[{"role": "user", "content": ` + quoteJSON(words) + `}]`)}).chatInput("string")
	in.SpecialTokens = text.SpecialTokens
	rendered, err := text.Template.RenderContext(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	n := len(text.Tokenizer.Encode(rendered, false))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "1234"
	}
	tokenBody := `{"prompt": [` + strings.Join(ids, ",") + `], "max_tokens": 256, "stream": true}`
	b.Logf("prompt: %d tokens", n)

	for _, tc := range []struct {
		name, path, body string
		text             *Text
	}{
		{"token-ids", "/v1/completions", tokenBody, nil},
		{"text-chat", "/v1/chat/completions", chatBody, text},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFakeCore(b, 1)
			reg := prometheus.NewRegistry()
			api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return nil },
				Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}, Registerer: reg, Text: tc.text})
			ts := httptest.NewServer(api.Handler())
			defer ts.Close()
			stop := make(chan struct{})
			drained := make(chan struct{})
			go func() { // the fake engines record every ADD; keep their channel from filling
				defer close(drained)
				for {
					select {
					case <-f.Adds:
					case <-stop:
						return
					}
				}
			}()
			defer func() { close(stop); testwait.Closed(b, drained, "the ADD drain to stop") }()
			loopCPU(b, func() {
				resp, err := testwait.HTTPClient.Post(ts.URL+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
					b.Fatalf("%d %s", resp.StatusCode, body)
				}
			})
		})
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// BenchmarkTextWork is the CPU text adds to one request, without HTTP: reading the
// chat body, rendering and tokenizing a ~1,000-token prompt, then 256 outputs
// detokenized and encoded as chat chunks; "token-ids" is the same 256 outputs
// encoded as token-id chunks, the work text replaces.
func BenchmarkTextWork(b *testing.B) {
	text := benchText(b)
	words := strings.Repeat("the quick brown fox jumps over the lazy dog ", 110)
	body := `{"messages": [{"role": "user", "content": ` + quoteJSON(words) + `}], "max_tokens": 256, "stream": true}`
	api := &API{text: text, now: timeNow, contextLen: func(int) int64 { return 0 }}
	outs := make([]dispatcher.Output, 256)
	for i := range outs {
		outs[i] = dispatcher.Output{TokenIDs: []int64{int64(1000 + i*37%5000)}}
	}
	outs[255].Finish = wire.FinishLength
	b.Run("prompt", func(b *testing.B) {
		loopCPU(b, func() {
			chat, err := readChat(strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if err := chat.validate(); err != nil {
				b.Fatal(err)
			}
			if _, apiErr := api.renderChat(context.Background(), chat, nil); apiErr != nil {
				b.Fatal(apiErr)
			}
		})
	})
	chat, _ := readChat(strings.NewReader(body))
	_ = chat.validate()
	prompt, _ := api.renderChat(context.Background(), chat, nil)
	in, _ := chat.chatInput("string")
	in.SpecialTokens = text.SpecialTokens
	rendered, _ := text.Template.RenderContext(context.Background(), in)
	b.Run("prompt-tokenizer-only", func(b *testing.B) {
		loopCPU(b, func() { text.Tokenizer.Encode(rendered, false) })
	})
	b.Logf("prompt: %d tokens", len(prompt))
	b.Run("outputs-text", func(b *testing.B) {
		loopCPU(b, func() {
			run := newTextRun(text, &chat.CompletionRequest, chat, "chatcmpl-x", "m", 1, [][]int64{prompt})
			prefix := run.chunkPrefix()
			var buf []byte
			for i := range outs {
				d, _ := run.add(0, &outs[i])
				buf = run.appendChunk(buf[:0], prefix, 0, d)
			}
		})
	})
	b.Run("outputs-token-ids", func(b *testing.B) {
		loopCPU(b, func() {
			c := newCompletion("cmpl-x", "m", 1, [][]int64{prompt}, 1)
			for i := range outs {
				if _, err := json.Marshal(c.chunk([]Choice{c.add(0, toWire(&outs[i]))}, nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
