package httpapi

import (
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/dispatcher"
)

// A prompt that fills the context is refused with vLLM's serving-layer text.
func TestPromptTooLongText(t *testing.T) {
	f, ts := newParityAPI(t, 0, APIConfig{})
	f.D.EngineUpWith(0, dispatcher.EngineLimits{MaxModelLen: 8})
	resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9], "max_tokens": 1}`)
	want := "This model's maximum context length is 8 tokens. However, your request has 9 input tokens. Please reduce the length of the input messages."
	if resp.StatusCode != 400 || !strings.Contains(string(body), want) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
