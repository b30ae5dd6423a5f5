package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// benchBody is a typical completions body with a prompt of n token ids.
func benchBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model": "m", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "stream": true, "stop_token_ids": [2], "prompt": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(1000 + i*37%120000))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseCompletion measures the streaming decoder; .../encoding-json is
// what the body cost before (encoding/json into the struct, then the prompt
// decoded again from its raw JSON), for comparison.
func BenchmarkParseCompletion(b *testing.B) {
	type oldReq struct {
		CompletionRequest
		Prompt json.RawMessage `json:"prompt"`
	}
	for _, n := range []int{32, 4096} {
		body := benchBody(n)
		b.Run("streaming/prompt="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseCompletion(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encoding-json/prompt="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var r oldReq
				if err := json.Unmarshal(body, &r); err != nil {
					b.Fatal(err)
				}
				var ids []int64
				if err := json.Unmarshal(r.Prompt, &ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
