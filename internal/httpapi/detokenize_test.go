package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// /detokenize applies clean_up_tokenization_spaces when the tokenizer config
// sets it, as transformers' decode (what vLLM's /detokenize runs) does.
func TestDetokenizeCleanUpSpaces(t *testing.T) {
	pieces := map[int64]string{10: "Hello", 11: " ,", 12: " I", 13: " 'm", 14: " here", 15: " ."}
	for _, clean := range []bool{false, true} {
		_, ts := newParityAPI(t, 1, APIConfig{Text: &Text{Name: "tiny", Root: "/models/tiny", Tokenizer: &fakeTextTok{pieces: pieces},
			Template: fakeTemplate{format: "string"}, CleanUpTokenizationSpaces: clean}})
		status, body := postPath(t, ts, "/detokenize", `{"model": "tiny", "tokens": [10, 11, 12, 13, 14, 15]}`)
		var got struct{ Prompt string }
		want := map[bool]string{false: "Hello , I 'm here .", true: "Hello, I'm here."}[clean]
		if err := json.Unmarshal(body, &got); err != nil || status != 200 || got.Prompt != want {
			t.Errorf("clean %v: %d %s; want %q", clean, status, body, want)
		}
	}
	if !cleanUpSpaces([]byte(`{"clean_up_tokenization_spaces": true}`)) || cleanUpSpaces([]byte(`{}`)) ||
		cleanUpSpaces([]byte(`not json`)) {
		t.Error("clean_up_tokenization_spaces misread")
	}
	if got := cleanUpTokenization("a ' b do n't"); !strings.Contains(got, "a'b") || !strings.Contains(got, "don't") {
		t.Errorf("%q", got)
	}
}
