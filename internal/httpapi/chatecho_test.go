package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// Chat's echo as vLLM's: the last message's content comes first when its role is
// the answer's, whole and streamed (a chunk of its own after the role chunk).
func TestChatEcho(t *testing.T) {
	_, ts := newParityAPI(t, 1, APIConfig{Text: &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096,
		Tokenizer: &fakeTextTok{pieces: map[int64]string{100: " Hi"}}, Template: fakeTemplate{format: "string"}}})
	const msgs = `[{"role": "user", "content": "q"}, {"role": "assistant", "content": "The answer is"}]`
	content := func(body string) string {
		t.Helper()
		status, b := postPath(t, ts, "/v1/chat/completions", body)
		var got ChatResponse
		if err := json.Unmarshal(b, &got); err != nil || status != 200 || got.Choices[0].Message.Content == nil {
			t.Fatalf("%d %s", status, b)
		}
		return *got.Choices[0].Message.Content
	}
	if got := content(`{"model": "tiny", "messages": ` + msgs + `, "max_tokens": 1, "echo": true}`); got != "The answer is Hi" {
		t.Errorf("echo: %q", got)
	}
	if got := content(`{"model": "tiny", "messages": ` + msgs + `, "max_tokens": 1}`); got != " Hi" {
		t.Errorf("no echo: %q", got)
	}
	if got := content(`{"model": "tiny", "messages": [{"role": "user", "content": "q"}], "max_tokens": 1, "echo": true}`); got != " Hi" {
		t.Errorf("echo of a user message to an assistant answer: %q", got)
	}
	status, b := postPath(t, ts, "/v1/chat/completions", `{"model": "tiny", "messages": `+msgs+`, "max_tokens": 1, "echo": true, "stream": true}`)
	events := readSSE(t, strings.NewReader(string(b)))
	var deltas []string
	for _, e := range events[:len(events)-1] {
		var ch ChatChunk
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		if c := ch.Choices[0].Delta.Content; c != nil {
			deltas = append(deltas, *c)
		}
	}
	if status != 200 || len(deltas) < 3 || deltas[0] != "" || deltas[1] != "The answer is" || strings.Join(deltas, "") != "The answer is Hi" {
		t.Errorf("%d %q\n%s", status, deltas, b)
	}
}
