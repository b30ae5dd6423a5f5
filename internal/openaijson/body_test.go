package openaijson

import (
	"encoding/json"
	"reflect"
	"strings"
)

// testBody has a field of every type the server's bodies decode (the completions
// and chat bodies' scalars, lists, raw JSON and stream_options), under their names.
type testBody struct {
	Model             string          `json:"model"`
	MaxTokens         *int64          `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int64          `json:"top_k"`
	Seed              *int64          `json:"seed"`
	N                 *int64          `json:"n"`
	StopTokenIDs      []int64         `json:"stop_token_ids"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	MinTokens         int64           `json:"min_tokens"`
	Stream            bool            `json:"stream"`
	StreamOptions     *StreamOptions  `json:"stream_options"`
	CacheSalt         *string         `json:"cache_salt"`
	RequestID         string          `json:"request_id"`
	Stop              json.RawMessage `json:"stop"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	GuidedChoice      []string        `json:"guided_choice"`
	Messages          json.RawMessage `json:"messages"`
	Tools             json.RawMessage `json:"tools"`
}

// testFields maps testBody's JSON names to its field indexes.
var testFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[testBody]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = i
	}
	return m
}()

// field is testBody's field table, as a server body type writes it by hand.
func (b *testBody) field(key string) any {
	i, ok := testFields[key]
	if !ok {
		return nil
	}
	return reflect.ValueOf(b).Elem().Field(i).Addr().Interface()
}

// testDecoder decodes testBody with the server's bound on prompts.
var testDecoder = NewDecoder(128, reflect.TypeFor[testBody]())
