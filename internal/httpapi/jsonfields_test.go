package httpapi

import (
	"encoding/json"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"strings"
	"testing"
)

// decodeBoth decodes body as a completion and as a chat request, with the scalar
// fast paths and with encoding/json alone, and returns both results as text.
func decodeBoth(t testing.TB, body string) (fast, slow string) {
	t.Helper()
	run := func(slowOnly bool) string {
		slowScalarsOnly = slowOnly
		defer func() { slowScalarsOnly = false }()
		var out strings.Builder
		if req, err := readCompletion(strings.NewReader(body), apicore.MaxPromptTokens); err != nil {
			fmt.Fprintf(&out, "completion error: %v\n", err)
		} else {
			b, _ := json.Marshal(req)
			fmt.Fprintf(&out, "completion %s prompts %v\n", b, req.prompts)
		}
		var chat ChatRequest
		if err := readObject(strings.NewReader(body), apicore.MaxPromptTokens, &chat, nil); err != nil {
			fmt.Fprintf(&out, "chat error: %v\n", err)
		} else {
			b, _ := json.Marshal(chat)
			fmt.Fprintf(&out, "chat %s\n", b)
		}
		return out.String()
	}
	return run(false), run(true)
}

// TestBodyScalarFastPathsAgreeWithEncodingJSON: every field the fast paths decode
// (strings, integers, floats, booleans, lists of integers, null) comes out as
// encoding/json decodes it, errors included, with and without whitespace around
// the value (Python's json.dumps writes `"max_tokens": 16`).
func TestBodyScalarFastPathsAgreeWithEncodingJSON(t *testing.T) {
	values := map[string][]string{
		"model":          {`"m"`, `"é"`, `"a\"b"`, `"\u00e9"`, `null`, `1`, `""`},
		"max_tokens":     {`16`, `-3`, `0`, `null`, `1.5`, `1e3`, `123456789012345678`, `1234567890123456789`, `99999999999999999999`, `"16"`, `true`},
		"temperature":    {`0.7`, `0`, `-0`, `1E2`, `1e-7`, `null`, `1e400`, `-1e400`, `"0.7"`, `true`, `[1]`, `123456789012345678901234567890`},
		"stream":         {`true`, `false`, `null`, `1`, `"true"`},
		"stop_token_ids": {`[]`, `[2]`, `[ 1 , 2 ]`, "[\n1,\t2\n]", `null`, `[1.5]`, `[-1]`, `[1234567890123456789]`, `["a"]`, `[[1]]`, `[null]`, `{}`},
		"stream_options": {`null`, `{"include_usage": true}`, `{}`},
		"messages":       {`[{"role": "user", "content": "hi"}]`, `null`},
	}
	for field, vals := range values {
		for _, v := range vals {
			for _, sep := range []string{":", ": ", " :\n\t", ":  "} {
				body := `{"prompt": [1, 2], "stream": true, "` + field + `"` + sep + v + ` , "max_tokens" :4, "model": "x"}`
				if fast, slow := decodeBoth(t, body); fast != slow {
					t.Errorf("%s\nfast: %s\nslow: %s", body, fast, slow)
				}
			}
		}
	}
}

// FuzzBodyScalarFastPaths holds the fast paths to encoding/json on any body.
func FuzzBodyScalarFastPaths(f *testing.F) {
	for _, s := range []string{
		`{"prompt": [1], "max_tokens": 16, "temperature": 0.5, "stop_token_ids": [1, 2]}`,
		`{"model":"m","top_p":1e-3,"stream":false,"stream_options":null}`,
		`{"messages": [{"role": "user", "content": "x"}], "seed": -1, "n": 2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if fast, slow := decodeBoth(t, body); fast != slow {
			t.Errorf("%q\nfast: %s\nslow: %s", body, fast, slow)
		}
	})
}

// A body's fields are captured into one reused buffer: a field kept raw (a chat's
// messages) must not change when the fields after it are read.
func TestCapturedRawFieldsOutliveTheNextField(t *testing.T) {
	body := `{"messages": [{"role": "user", "content": "first"}], "tools": [{"type": "function"}],` +
		` "model": "a much longer model name that overwrites the buffer", "max_tokens": 7}`
	var chat ChatRequest
	if err := readObject(strings.NewReader(body), apicore.MaxPromptTokens, &chat, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(chat.Messages); got != `[{"role": "user", "content": "first"}]` {
		t.Errorf("messages = %s", got)
	}
	if got := string(chat.Tools); got != `[{"type": "function"}]` {
		t.Errorf("tools = %s", got)
	}
}

// `"stream_options": null` with a space after the colon (Python's json.dumps) is
// null: before capture dropped the leading whitespace, it decoded to empty
// options, which a non-streaming request is refused for.
func TestStreamOptionsNullWithSpace(t *testing.T) {
	req, err := readCompletion(strings.NewReader(`{"prompt": [1], "stream": false, "stream_options": null}`), apicore.MaxPromptTokens)
	if err != nil {
		t.Fatal(err)
	}
	if req.StreamOptions != nil {
		t.Errorf("stream_options = %+v, want nil", req.StreamOptions)
	}
}

// A body's known member names are not allocated per member.
func TestParseCompletionAllocations(t *testing.T) {
	body := []byte(`{"model": "m", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "stream": true, "stop_token_ids": [2], "prompt": [1, 2, 3]}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseCompletion(body); err != nil {
			t.Fatal(err)
		}
	})
	// The request, its prompt, the model string, three pointer scalars, the stop
	// list, the reader: about 9. Before: 46.
	if allocs > 12 {
		t.Errorf("%v allocations per body, want at most 12", allocs)
	}
}
