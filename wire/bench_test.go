package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Benchmarks of the two hot paths, each next to the same operation through
// vmihailenco/msgpack/v5 reflection, so the ratio shows what the hand-written codec
// buys:
//
//	go test -run '^$' -bench . -benchmem ./wire/

// benchOutputs is one engine step as a busy engine sends it: 256 running requests,
// one new token each, full-length 17-field entries, with scheduler stats.
func benchOutputs() *EngineCoreOutputs {
	o := &EngineCoreOutputs{EngineIndex: 0, Timestamp: 12345.678, Outputs: make([]EngineCoreOutput, 256)}
	for i := range o.Outputs {
		o.Outputs[i] = EngineCoreOutput{
			RequestID:    fmt.Sprintf("cmpl-%032x-0", i*7919),
			NewTokenIDs:  []int64{int64(1000 + i*577%150000)},
			FinishReason: FinishNone,
		}
	}
	var stats []byte
	stats = appendMapHeader(stats, 6)
	for _, k := range []string{"num_running_reqs", "num_waiting_reqs", "num_skipped_waiting_reqs", "step_counter", "current_wave"} {
		stats = appendInt(appendStr(stats, k), 256)
	}
	stats = appendFloat(appendStr(stats, "kv_cache_usage"), 0.42)
	o.SchedulerStats = &SchedulerStats{Raw: stats}
	return o
}

// benchAdd is one ADD: a 1,000-token prompt and typical chat sampling parameters.
func benchAdd() *EngineCoreRequest {
	p := DefaultSamplingParams()
	p.Temperature, p.TopP, p.MaxTokens = 0.7, 0.9, SomeInt(256)
	p.SetEOS(SomeInt(151645), 151643)
	p.Normalize()
	prompt := make([]int64, 1000)
	for i := range prompt {
		prompt[i] = int64(i * 131 % 151000)
	}
	return &EngineCoreRequest{
		RequestID: "cmpl-3f2a9c1d8e7b4a6f9c0d1e2f3a4b5c6d-0", PromptTokenIDs: prompt, Sampling: &p,
		ArrivalTime: 1767225600.25, ExternalReqID: SomeString("cmpl-3f2a9c1d8e7b4a6f9c0d1e2f3a4b5c6d"),
	}
}

func BenchmarkDecodeOutputs256(b *testing.B) {
	benchDecodeOutputs(b, benchOutputs())
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/entry")
}

// benchDecodeOutputs times decoding o's message with one reused decoder, as the
// frontend's output loop does.
func benchDecodeOutputs(b *testing.B, o *EngineCoreOutputs) {
	body, _, err := AppendOutputs(nil, o)
	if err != nil {
		b.Fatal(err)
	}
	frames := [][]byte{body}
	var d OutputsDecoder
	var into EngineCoreOutputs
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(frames, &into); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAdd1000(b *testing.B) {
	q := benchAdd()
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		body, _, err := AppendAdd(buf[:0], q)
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeAdd1000(b *testing.B) {
	body, _, _ := AppendAdd(nil, benchAdd())
	frames := [][]byte{body}
	var q EngineCoreRequest
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeAdd(frames, &q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeOutputs256(b *testing.B) { benchEncodeOutputs(b, benchOutputs(), 32<<10) }

// benchEncodeOutputs times encoding o into one reused buffer of capacity bytes.
func benchEncodeOutputs(b *testing.B, o *EngineCoreOutputs, capacity int) {
	buf := make([]byte, 0, capacity)
	b.ReportAllocs()
	for b.Loop() {
		body, _, err := AppendOutputs(buf[:0], o)
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
}

// ---- the same through vmihailenco/msgpack/v5 reflection ----

type vmOutput struct {
	//lint:ignore U1000 read by vmihailenco through reflection
	_msgpack                 struct{} `msgpack:",as_array"`
	RequestID                string
	NewTokenIDs              []int64
	NewLogprobs              msgpack.RawMessage
	NewPromptLogprobsTensors msgpack.RawMessage
	PoolingOutput            msgpack.RawMessage
	FinishReason             *int8
	StopReason               any
	Events                   []map[string]any
	KVTransferParams         msgpack.RawMessage
	ECTransferParams         msgpack.RawMessage
	TraceHeaders             map[string]string
	PrefillStats             map[string]int64
	RoutedExperts            msgpack.RawMessage
	NumNaNsInLogits          int64
	MMCacheMissHashes        []string
	NewSamplingMask          msgpack.RawMessage
	SpecDecodeMetrics        msgpack.RawMessage
}

type vmOutputs struct {
	//lint:ignore U1000 read by vmihailenco through reflection
	_msgpack         struct{} `msgpack:",as_array"`
	EngineIndex      int64
	Outputs          []vmOutput
	SchedulerStats   map[string]any
	Timestamp        float64
	UtilityOutput    msgpack.RawMessage
	FinishedRequests []string
	WaveComplete     *int64
	StartWave        *int64
}

type vmSampling struct {
	Temperature            float64  `msgpack:"temperature,omitempty"`
	TopP                   float64  `msgpack:"top_p,omitempty"`
	Stop                   []string `msgpack:"stop"`
	StopTokenIDs           []int64  `msgpack:"stop_token_ids"`
	MaxTokens              int64    `msgpack:"max_tokens,omitempty"`
	EOSTokenID             *int64   `msgpack:"_eos_token_id,omitempty"`
	AllStopTokenIDs        []int64  `msgpack:"_all_stop_token_ids,omitempty"`
	BadWords               []string `msgpack:"bad_words"`
	SkipReadingPrefixCache bool     `msgpack:"skip_reading_prefix_cache"`
}

type vmAdd struct {
	//lint:ignore U1000 read by vmihailenco through reflection
	_msgpack              struct{} `msgpack:",as_array"`
	RequestID             string
	PromptTokenIDs        []int64
	MMFeatures            msgpack.RawMessage
	Sampling              *vmSampling
	PoolingParams         msgpack.RawMessage
	ArrivalTime           float64
	LoRA                  msgpack.RawMessage
	CacheSalt             *string
	DataParallelRank      *int64
	PromptEmbeds          msgpack.RawMessage
	PromptIsTokenIDs      []bool
	ClientIndex           int64
	CurrentWave           int64
	Priority              int64
	TraceHeaders          map[string]string
	Resumable             bool
	ExternalReqID         *string
	ReasoningEnded        *bool
	ReasoningParserKwargs msgpack.RawMessage
	AbortImmediately      bool
	SessionID             *string
}

func BenchmarkVmihailencoDecodeOutputs256(b *testing.B) {
	body, _, _ := AppendOutputs(nil, benchOutputs())
	rd := bytes.NewReader(body)
	dec := msgpack.NewDecoder(rd)
	var o vmOutputs
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		dec.Reset(rd)
		o.Outputs = o.Outputs[:0]
		if err := dec.Decode(&o); err != nil {
			b.Fatal(err)
		}
	}
	if len(o.Outputs) != 256 || o.Outputs[255].NewTokenIDs[0] == 0 {
		b.Fatalf("decoded %d outputs", len(o.Outputs))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/entry")
}

func BenchmarkVmihailencoEncodeAdd1000(b *testing.B) {
	q := benchAdd()
	eos := q.Sampling.EOSTokenID.Value
	ext := q.ExternalReqID.Value
	v := &vmAdd{
		RequestID: q.RequestID, PromptTokenIDs: q.PromptTokenIDs, ArrivalTime: q.ArrivalTime, ExternalReqID: &ext,
		Sampling: &vmSampling{Temperature: 0.7, TopP: 0.9, Stop: []string{}, StopTokenIDs: q.Sampling.StopTokenIDs, MaxTokens: 256,
			EOSTokenID: &eos, AllStopTokenIDs: q.Sampling.AllStopTokenIDs, BadWords: []string{}},
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

// BenchmarkValidateAdd1000 is the per-request cost of the checks run before every
// send (Validate includes EngineAccepts).
func BenchmarkValidateAdd1000(b *testing.B) {
	q := benchAdd()
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
