package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/textgen"
)

// Every stop list a request may carry is compiled into textgen's automaton; a larger
// cap here would leave the largest lists to the per-string search.
func TestStopCapsWithinAutomaton(t *testing.T) {
	if MaxStopBytes > textgen.MaxStopSetBytes {
		t.Fatalf("MaxStopBytes %d > textgen.MaxStopSetBytes %d", MaxStopBytes, textgen.MaxStopSetBytes)
	}
	stop := make([]string, MaxStopStrings)
	for i := range stop {
		stop[i] = string(rune('a' + i%26))
	}
	if textgen.CompileStops(stop) == nil {
		t.Fatal("the largest number of stop strings is not compiled")
	}
}

// Several stop strings go through the automaton, shared by the n choices: the
// first of the list that the step completes wins, as in vLLM, though another
// completes earlier in the text.
func TestTextStopStringsListOrder(t *testing.T) {
	_, ts := newTextAPI(t, map[int64]string{100: "Hel", 101: "lo S", 102: "TO", 103: "P and", 104: " more"})
	code, body := postPath(t, ts, "/v1/completions", `{"prompt": "x", "max_tokens": 5, "n": 2, "stop": ["and", "STOP", "P a"]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got TextCompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 2 {
		t.Fatalf("got %s", body)
	}
	for _, c := range got.Choices {
		if c.Text != "Hello STOP " || *c.FinishReason != "stop" || c.StopReason != "and" {
			t.Fatalf("got %s", body)
		}
	}
}
