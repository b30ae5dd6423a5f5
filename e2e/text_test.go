package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// modelDir is a real model's tokenizer directory from the models cache that .ci/run
// fills; missing, the test fails in CI and skips elsewhere.
func modelDir(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("SWITCHYARD_MODELS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "switchyard", "models")
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (.ci/run fetches the tokenizer files)", dir, err)
		}
		t.Skipf("%s: %v", dir, err)
	}
	return dir
}

// textServer is serve --tokenizer qwen3 with one mock engine in its own process,
// logging every request it receives (the ABORTs included).
func textServer(t *testing.T) (*server, *proc) {
	t.Helper()
	s := startServe(t, "--tokenizer", modelDir(t, "qwen3"), "--handshake-address", "tcp://127.0.0.1:0")
	eng := start(t, "mock-engine", "--log-level", "debug", "mock-engine", "--handshake-address", s.handshake, "--step-ms", "5")
	eventually(t, 20*time.Second, "the engine is ready", func() bool {
		e := s.engines(t)
		return len(e) == 1 && e[0].Ready
	})
	return s, eng
}

func (s *server) postJSON(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type textAnswer struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
			Content       []struct {
				Token string `json:"token"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, b []byte) textAnswer {
	t.Helper()
	var a textAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return a
}

// streamText folds a text stream: the text per choice, finish and stop reasons.
func streamText(t *testing.T, body []byte, chat bool) (text map[int]string, finish map[int]string, stop map[int]any, first textAnswer, usage bool, done bool) {
	t.Helper()
	text, finish, stop = map[int]string{}, map[int]string{}, map[int]any{}
	events := sse(body)
	for i, e := range events {
		if e == "[DONE]" {
			done = true
			continue
		}
		a := decodeAnswer(t, []byte(e))
		if i == 0 {
			first = a
		}
		usage = usage || a.Usage != nil
		for _, c := range a.Choices {
			if chat {
				if c.Delta.Content != nil {
					text[c.Index] += *c.Delta.Content
				}
			} else {
				text[c.Index] += c.Text
			}
			if !utf8.ValidString(text[c.Index]) {
				t.Fatalf("chunk %d broke UTF-8: %q", i, text[c.Index])
			}
			if c.FinishReason != nil {
				finish[c.Index], stop[c.Index] = *c.FinishReason, c.StopReason
			}
		}
	}
	return
}

func TestTextChatAndCompletions(t *testing.T) {
	s, eng := textServer(t)
	const msgs = `[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colours."}]`

	// The prompt the template renders, tokenized: what the engine is sent.
	code, b := s.postJSON(t, "/tokenize", `{"messages": `+msgs+`}`)
	var tok struct {
		Count  int     `json:"count"`
		Tokens []int64 `json:"tokens"`
	}
	if json.Unmarshal(b, &tok); code != 200 || tok.Count == 0 || !slices.Contains(tok.Tokens, 151644) { // <|im_start|>
		t.Fatalf("tokenize messages: %d %s", code, b)
	}

	// Non-streaming chat, n = 2: the mock is deterministic, so both choices agree.
	code, b = s.postJSON(t, "/v1/chat/completions", `{"model": "qwen3", "messages": `+msgs+`, "max_tokens": 24, "n": 2}`)
	full := decodeAnswer(t, b)
	if code != 200 || len(full.Choices) != 2 || full.Object != "chat.completion" || !strings.HasPrefix(full.ID, "chatcmpl-") ||
		full.Choices[0].Message.Content == "" || full.Choices[0].Message.Content != full.Choices[1].Message.Content ||
		full.Usage.PromptTokens != tok.Count || full.Usage.CompletionTokens != 48 {
		t.Fatalf("chat: %d %s", code, b)
	}
	answer := full.Choices[0].Message.Content

	// Streaming chat: the role chunk, deltas adding up to the same text, usage, [DONE].
	code, b = s.postJSON(t, "/v1/chat/completions", `{"messages": `+msgs+`, "max_completion_tokens": 24, "stream": true, "stream_options": {"include_usage": true}}`)
	text, finish, _, first, usage, done := streamText(t, b, true)
	if code != 200 || first.Choices[0].Delta.Role != "assistant" || text[0] != answer || finish[0] != "length" || !usage || !done {
		t.Fatalf("chat stream: %q %v %v %v\n%s", text[0], finish, usage, done, b)
	}

	// A stop string from the middle of the answer, split across steps or not: the
	// text ends before it, stop_reason names it, and the engine gets an ABORT.
	runes := []rune(answer)
	stopStr := string(runes[len(runes)/2 : len(runes)/2+3])
	want := answer[:strings.Index(answer, stopStr)]
	req := `{"messages": ` + msgs + `, "max_tokens": 2000, "stop": [` + jsonString(stopStr) + `], "stream": true}`
	code, b = s.postJSON(t, "/v1/chat/completions", req)
	text, finish, stop, _, _, _ := streamText(t, b, true)
	if code != 200 || text[0] != want || finish[0] != "stop" || stop[0] != stopStr {
		t.Fatalf("stop %q: got %q (%v %v), want %q\n%s", stopStr, text[0], finish, stop, want, b)
	}
	eventually(t, 5*time.Second, "the mock engine logs the ABORT", func() bool {
		return strings.Contains(eng.log(), `"msg":"mockengine: request","rank":0,"type":1}`) ||
			strings.Contains(eng.log(), `"type":"ABORT"`)
	})

	// include_stop_str_in_output keeps the stop string.
	code, b = s.postJSON(t, "/v1/chat/completions", `{"messages": `+msgs+`, "max_tokens": 2000, "include_stop_str_in_output": true, "stop": `+jsonString(stopStr)+`}`)
	a := decodeAnswer(t, b)
	if code != 200 || a.Choices[0].Message.Content != want+stopStr {
		t.Fatalf("include_stop_str_in_output: %s", b)
	}
	// min_tokens as long as max_tokens: no stop string can end it.
	code, b = s.postJSON(t, "/v1/chat/completions", `{"messages": `+msgs+`, "max_tokens": 24, "min_tokens": 24, "stop": `+jsonString(stopStr)+`}`)
	a = decodeAnswer(t, b)
	if code != 200 || a.Choices[0].Message.Content != answer || *a.Choices[0].FinishReason != "length" {
		t.Fatalf("min_tokens: %s", b)
	}

	// Completions with a string prompt, echo and logprobs.
	code, b = s.postJSON(t, "/v1/completions", `{"prompt": "The sky is", "max_tokens": 5, "echo": true}`)
	a = decodeAnswer(t, b)
	if code != 200 || !strings.HasPrefix(a.Choices[0].Text, "The sky is") || len(a.Choices[0].Text) <= len("The sky is") || a.Object != "text_completion" {
		t.Fatalf("echo: %s", b)
	}
	code, b = s.postJSON(t, "/v1/completions", `{"prompt": "The sky is", "max_tokens": 5, "logprobs": 2}`)
	a = decodeAnswer(t, b)
	if lp := a.Choices[0].Logprobs; code != 200 || lp == nil || len(lp.Tokens) != 5 || strings.Join(lp.Tokens, "") != a.Choices[0].Text || *lp.TokenLogprobs[0] != -0.25 {
		t.Fatalf("logprobs: %s", b)
	}
	// echo with logprobs: the prompt's tokens lead, the first without a logprob
	// (vLLM's prompt_logprobs), and prompt_logprobs comes back too.
	code, b = s.postJSON(t, "/v1/completions", `{"prompt": "The sky is", "max_tokens": 2, "logprobs": 1, "echo": true}`)
	var echoed struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
			PromptLogprobs []map[string]any `json:"prompt_logprobs"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &echoed); code != 200 || len(echoed.Choices) != 1 || len(echoed.Choices[0].Logprobs.TokenLogprobs) != 5 ||
		echoed.Choices[0].Logprobs.TokenLogprobs[0] != nil || len(echoed.Choices[0].PromptLogprobs) != 3 || echoed.Choices[0].PromptLogprobs[0] != nil {
		t.Fatalf("echo with logprobs: %s", b)
	}
	// 20 top logprobs of 5 tokens: arrays over 256 bytes travel in tensor frames.
	code, b = s.postJSON(t, "/v1/chat/completions", `{"messages": `+msgs+`, "max_tokens": 5, "logprobs": true, "top_logprobs": 20}`)
	var chatLP struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Token       string `json:"token"`
					TopLogprobs []any  `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &chatLP); code != 200 || len(chatLP.Choices) != 1 || len(chatLP.Choices[0].Logprobs.Content) != 5 ||
		len(chatLP.Choices[0].Logprobs.Content[4].TopLogprobs) != 20 {
		t.Fatalf("chat logprobs: %s", b)
	}

	// Another model's name is vLLM's 404.
	code, b = s.postJSON(t, "/v1/chat/completions", `{"model": "gpt-4", "messages": `+msgs+`}`)
	a = decodeAnswer(t, b)
	if code != 404 || a.Error == nil || a.Error.Message != "The model `gpt-4` does not exist." || a.Error.Type != "NotFoundError" {
		t.Fatalf("model 404: %d %s", code, b)
	}

	// /tokenize and /detokenize round trip.
	const hostile = "Grüße, 世界! 👩‍👩‍👧 tabs\t\tand  spaces <|im_end|>"
	code, b = s.postJSON(t, "/tokenize", `{"prompt": `+jsonString(hostile)+`}`)
	json.Unmarshal(b, &tok)
	ids, _ := json.Marshal(tok.Tokens)
	code2, b2 := s.postJSON(t, "/detokenize", `{"tokens": `+string(ids)+`}`)
	var detok struct {
		Prompt string `json:"prompt"`
	}
	json.Unmarshal(b2, &detok)
	if code != 200 || code2 != 200 || detok.Prompt != hostile {
		t.Fatalf("round trip: %d %s -> %d %s", code, b, code2, b2)
	}

	// /v1/models: the directory's name and vLLM's shape.
	code, b = s.get(t, "/v1/models")
	if code != 200 || !strings.Contains(string(b), `"id":"qwen3"`) || !strings.Contains(string(b), `"owned_by":"vllm"`) {
		t.Fatalf("models: %s", b)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestTextEmbeddedDefault: bare serve answers a chat with a sentence (the README's
// first curl) while token-id requests get token ids as before.
func TestTextEmbeddedDefault(t *testing.T) {
	s := startServe(t)
	code, b := s.postJSON(t, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hello! Who are you?"}]}`)
	a := decodeAnswer(t, b)
	if code != 200 || len(a.Choices) != 1 || *a.Choices[0].FinishReason != "stop" || !strings.HasSuffix(a.Choices[0].Message.Content, ".") ||
		len(strings.Fields(a.Choices[0].Message.Content)) < 4 {
		t.Fatalf("chat: %d %s", code, b)
	}
	_, b, err := s.post(context.Background(), `{"prompt": [1, 2, 3], "max_tokens": 4}`)
	if err != nil || !strings.Contains(string(b), `"token_ids":[`) {
		t.Fatalf("token ids: %v %s", err, b)
	}
}
