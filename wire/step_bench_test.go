package wire

import (
	"fmt"
	"testing"
)

// The codec's cost per engine message at the latency bench's load (switchyard
// bench's default: 5,000 req/s over 8 engines, about 5 running requests per engine
// step), where the cost per message, not per entry, decides. They bound what a
// pass-through of the engine's bytes could save on the client protocol's output
// path (decoding, then encoding the client's copy):
//
//	go test -run '^$' -bench 'OutputsStep' -benchmem -count 6 ./wire/

// stepOutputs is one engine step of n one-token entries under client-protocol
// engine ids, with scheduler stats, as the bench engines send it.
func stepOutputs(n int) *EngineCoreOutputs {
	o := benchOutputs()
	o.Outputs = o.Outputs[:n]
	for i := range o.Outputs {
		o.Outputs[i].RequestID = fmt.Sprintf("c0080000001-%d", 100000+i)
	}
	return o
}

func BenchmarkDecodeOutputsStep(b *testing.B) { benchDecodeOutputs(b, stepOutputs(5)) }

func BenchmarkEncodeOutputsStep(b *testing.B) {
	o := stepOutputs(5)
	for i := range o.Outputs {
		o.Outputs[i].RequestID = fmt.Sprint(100000 + i) // the client's own ids
	}
	o.SchedulerStats = nil // the client's copy carries none
	benchEncodeOutputs(b, o, 4096)
}

// stepAdd is the ADD the latency bench's client sends: a 32-token prompt, 8 tokens
// to make, the rest of SamplingParams at its defaults.
func stepAdd(b *testing.B) [][]byte {
	sp := DefaultSamplingParams()
	sp.MaxTokens = SomeInt(8)
	sp.IgnoreEOS = true
	sp.Normalize()
	prompt := make([]int64, 32)
	for i := range prompt {
		prompt[i] = int64(100 + i)
	}
	body, aux, err := AppendAdd(nil, &EngineCoreRequest{RequestID: "bench-123456", PromptTokenIDs: prompt, Sampling: &sp, ArrivalTime: 1.7e9})
	if err != nil || aux != nil {
		b.Fatal(err)
	}
	return [][]byte{body}
}

// sinkReq keeps the decoded requests on the heap, as the client protocol's are
// (they are handed to the dispatcher), so the benchmarks count the allocations it
// pays.
var sinkReq *EngineCoreRequest

// BenchmarkDecodeAddStep decodes the bench client's ADD into a fresh request, its
// sampling params allocated by the decoder: two objects of the request's own.
//
//	go test -run '^$' -bench 'AddStep' -benchmem -count 6 ./wire/
func BenchmarkDecodeAddStep(b *testing.B) {
	frames := stepAdd(b)
	b.ReportAllocs()
	for b.Loop() {
		q := new(EngineCoreRequest)
		if err := DecodeAdd(frames, q); err != nil {
			b.Fatal(err)
		}
		sinkReq = q
	}
}

// BenchmarkDecodeAddWithStep is the same with the request and its sampling params
// in one allocation (DecodeAddWith), as the client protocol decodes its ADDs.
func BenchmarkDecodeAddWithStep(b *testing.B) {
	frames := stepAdd(b)
	type pair struct {
		q  EngineCoreRequest
		sp SamplingParams
	}
	b.ReportAllocs()
	for b.Loop() {
		p := new(pair)
		if err := DecodeAddWith(frames, &p.q, &p.sp); err != nil {
			b.Fatal(err)
		}
		sinkReq = &p.q
	}
}
