package openaijson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// decodeBoth decodes body with its prompt streamed and with "prompt" an unknown
// field (as a chat body has it), each with the scalar fast paths and with
// encoding/json alone, and returns both results as text.
func decodeBoth(t testing.TB, body string) (fast, slow string) {
	t.Helper()
	run := func(slowOnly bool) string {
		slowScalarsOnly = slowOnly
		defer func() { slowScalarsOnly = false }()
		var out strings.Builder
		var b testBody
		var pr Prompt
		if err := testDecoder.Decode(strings.NewReader(body), b.field, &pr); err != nil {
			fmt.Fprintf(&out, "completion error: %v\n", err)
		} else {
			j, _ := json.Marshal(b)
			fmt.Fprintf(&out, "completion %s prompts %v %q\n", j, pr.IDs, pr.Texts)
		}
		var chat testBody
		if err := testDecoder.Decode(strings.NewReader(body), chat.field, nil); err != nil {
			fmt.Fprintf(&out, "chat error: %v\n", err)
		} else {
			j, _ := json.Marshal(chat)
			fmt.Fprintf(&out, "chat %s\n", j)
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
	var b testBody
	if err := testDecoder.Decode(strings.NewReader(body), b.field, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(b.Messages); got != `[{"role": "user", "content": "first"}]` {
		t.Errorf("messages = %s", got)
	}
	if got := string(b.Tools); got != `[{"type": "function"}]` {
		t.Errorf("tools = %s", got)
	}
}

// `"stream_options": null` with a space after the colon (Python's json.dumps) is
// null: before capture dropped the leading whitespace, it decoded to empty
// options, which a non-streaming request is refused for.
func TestStreamOptionsNullWithSpace(t *testing.T) {
	var b testBody
	if err := testDecoder.Decode(strings.NewReader(`{"prompt": [1], "stream": false, "stream_options": null}`), b.field, &Prompt{}); err != nil {
		t.Fatal(err)
	}
	if b.StreamOptions != nil {
		t.Errorf("stream_options = %+v, want nil", b.StreamOptions)
	}
}
