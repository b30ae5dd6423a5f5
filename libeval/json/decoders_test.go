package json

import (
	stdjson "encoding/json"
	"strconv"
	"strings"

	"github.com/bytedance/sonic"
	goccy "github.com/goccy/go-json"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
)

// libReq is what a library decodes a completions body into: the server's
// request struct (its exported fields) plus the prompt as flat token ids,
// the fastest shape a library can be given for the benchmark bodies.
type libReq struct {
	httpapi.CompletionRequest
	Prompt []int64 `json:"prompt"`
}

// result is what the comparison looks at.
type result struct {
	ok        bool
	model     string
	maxTokens *int64
	stream    bool
	prompt    []int64
}

type decoder struct {
	name   string
	decode func(body []byte) result
}

func libDecoder(name string, unmarshal func([]byte, any) error) decoder {
	return decoder{name, func(body []byte) result {
		var r libReq
		if err := unmarshal(body, &r); err != nil {
			return result{}
		}
		return result{true, r.Model, r.MaxTokens, r.Stream, r.Prompt}
	}}
}

// ours is switchyard's decoder: ParseCompletion, then the prompt it parsed
// while streaming (one list of ids here).
func ours(body []byte) result {
	r, err := httpapi.ParseCompletion(body)
	if err != nil {
		return result{}
	}
	ps, err := r.Prompts()
	if err != nil || len(ps) != 1 {
		return result{}
	}
	return result{true, r.Model, r.MaxTokens, r.Stream, ps[0]}
}

var decoders = []decoder{
	{"ours (httpapi.ParseCompletion)", ours},
	libDecoder("encoding/json", stdjson.Unmarshal),
	libDecoder("goccy/go-json v0.12.0", goccy.Unmarshal),
	libDecoder("bytedance/sonic v1.15.5 (ConfigStd)", sonic.ConfigStd.Unmarshal),
	libDecoder("bytedance/sonic v1.15.5 (ConfigDefault)", sonic.ConfigDefault.Unmarshal),
}

// benchBody is the body server's BenchmarkParseCompletion measures: a
// typical completions request with a prompt of n token ids.
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
