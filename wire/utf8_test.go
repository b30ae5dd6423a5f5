package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestDecodersRefuseInvalidUTF8: msgspec UTF-8-decodes every str of what reaches
// an engine's input thread (EngineCoreProc.process_input_sockets decodes ADD with
// the typed decoder and ABORT/UTILITY with the generic one, both outside its try
// block), so the decoders of client-supplied messages refuse a bad str and name it.
func TestDecodersRefuseInvalidUTF8(t *testing.T) {
	addCase := func(edit func(q *EngineCoreRequest)) func() error {
		return func() error {
			q := goodRequest()
			edit(q)
			body, aux, err := AppendAdd(nil, q) // the encoder does not check: Validate does
			if err != nil {
				return err
			}
			var got EngineCoreRequest
			return DecodeAdd(append([][]byte{body}, aux...), &got)
		}
	}
	utility := func(method string, args Raw) func() error {
		return func() error {
			b := append([]byte{0x94, 0x00, 0x01}, appendStr(nil, method)...)
			_, _, _, _, err := DecodeUtility(append(b, args...))
			return err
		}
	}
	for _, tt := range []struct {
		name, typ, field string
		decode           func() error
	}{
		{"request_id", "EngineCoreRequest", "request_id", addCase(func(q *EngineCoreRequest) { q.RequestID = "\xff" })},
		{"external_req_id", "EngineCoreRequest", "external_req_id", addCase(func(q *EngineCoreRequest) { q.ExternalReqID = SomeString("a\xc0") })},
		{"trace header", "EngineCoreRequest", "trace_headers", addCase(func(q *EngineCoreRequest) { q.TraceHeaders = map[string]string{"k": "\xff"} })},
		{"stop", "SamplingParams", "stop", addCase(func(q *EngineCoreRequest) { q.Sampling.Stop = []string{"\xff"} })},
		{"sampling key", "EngineCoreRequest", "sampling_params", addCase(func(q *EngineCoreRequest) { q.Sampling.Unknown = []RawField{{"\xff", Raw{1}}} })},
		{"str in extra_args", "SamplingParams", "extra_args", addCase(func(q *EngineCoreRequest) { q.Sampling.ExtraArgs = mp([]kv{{"k", "\xff"}}) })},
		{"str in mm_features", "EngineCoreRequest", "mm_features", addCase(func(q *EngineCoreRequest) { q.MMFeatures = mp([]any{"\xff"}) })},
		{"lora_path", "LoRARequest", "lora_path", addCase(func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "\xff"} })},
		{"tensor dtype", "Tensor", "dtype", func() error {
			// AppendAdd refuses an unknown dtype, so spoil a good one in the body.
			q := goodRequest()
			q.PromptEmbeds = &Tensor{DType: "int8", Shape: []int64{1}, Data: []byte{1}}
			body, _, _ := AppendAdd(nil, q)
			body = bytes.Replace(body, []byte("\xa4int8"), []byte("\xa4\xffnt8"), 1)
			return DecodeAdd([][]byte{body}, &EngineCoreRequest{})
		}},
		{"tensor size", "Tensor", "data", func() error {
			q := goodRequest()
			q.PromptEmbeds = &Tensor{DType: "int8", Shape: []int64{7}, Data: make([]byte, 7)}
			body, _, _ := AppendAdd(nil, q)
			body = bytes.Replace(body, []byte("\xa4int8\x91\x07"), []byte("\xa4int8\x91\x08"), 1) // shape [7] -> [8]
			return DecodeAdd([][]byte{body}, &EngineCoreRequest{})
		}},
		{"abort id", "Abort", "request_ids", func() error { _, err := DecodeAbort(AppendAbort(nil, []string{"ok", "\xff"})); return err }},
		{"utility method", "Utility", "method", utility("\xff", Raw{0x90})},
		{"utility args", "Utility", "args", utility("m", mp([]any{"\xff"}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode()
			var de *DecodeError
			if !errors.As(err, &de) || de.Type != tt.typ || de.Field != tt.field {
				t.Errorf("got %v, want a DecodeError for %s.%s", err, tt.typ, tt.field)
			}
		})
	}
}

// TestAppendUtilityRefuses: the encoder refuses what the engine's generic decode
// would raise on, since the caller of a utility has no Validate step.
func TestAppendUtilityRefuses(t *testing.T) {
	for _, tt := range []struct {
		method string
		args   Raw
		field  string
	}{
		{"\xff", nil, "method"},
		{"m", mp([]any{"\xff"}), "args"},
		{"m", mp([]any{ext3{1}}), ""},                   // ext 3 is what the decoder accepts
		{"m", append([]byte{0x91}, 0xd4, 1, 0), "args"}, // ext 1 (pickle) raises without insecure serialization
		{"m", mp([]any{[]kv{{[]any{1}, 1}}}), "args"},   // an array as a map key
	} {
		_, err := AppendUtility(nil, 0, 1, tt.method, tt.args)
		var ee *EncodeError
		if tt.field == "" {
			if err != nil {
				t.Errorf("%q %x: %v", tt.method, tt.args, err)
			}
		} else if !errors.As(err, &ee) || ee.Field != tt.field {
			t.Errorf("%q %x: got %v, want an EncodeError for %s", tt.method, tt.args, err, tt.field)
		}
	}
}

// FuzzEngineAccepts: EngineAccepts and Validate never panic on anything DecodeAdd
// accepts, and a request the engine accepts still passes after encode -> decode.
//
//	go test -run '^$' -fuzz '^FuzzEngineAccepts$' -fuzztime 60s ./wire/
func FuzzEngineAccepts(f *testing.F) {
	seedBodies(f, "add_")
	for _, edit := range []func(q *EngineCoreRequest){
		func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a+"}}) },
		func(q *EngineCoreRequest) {
			q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 4}, {"min_count", 2}})
		},
		func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{5, 1.5}}) },
		func(q *EngineCoreRequest) {
			q.PromptEmbeds = &Tensor{DType: "float16", Shape: []int64{2}, Data: make([]byte, 4)}
		},
	} {
		q := goodRequest()
		edit(q)
		body, _, _ := AppendAdd(nil, q)
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var q EngineCoreRequest
		if DecodeAdd(append([][]byte{body}, auxFrames...), &q) != nil {
			return
		}
		_ = q.Validate()
		if EngineAccepts(&q) != nil {
			return
		}
		enc, aux, err := AppendAdd(nil, &q)
		if err != nil {
			t.Fatalf("accepted but cannot encode: %v", err)
		}
		var again EngineCoreRequest
		if err := DecodeAdd(append([][]byte{enc}, aux...), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if err := EngineAccepts(&again); err != nil {
			t.Fatalf("accepted, then refused after a round trip: %v", err)
		}
	})
}
