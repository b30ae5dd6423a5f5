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
