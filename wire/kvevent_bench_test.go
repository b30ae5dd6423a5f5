package wire

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// kvBenchBatch is a realistic step's batch: events BlockStored events of blocks
// blocks of size tokens each, chained by parent, with 64-bit hashes and token ids of
// a 150k vocabulary (mostly the 3- and 5-byte int forms).
func kvBenchBatch(events, blocks, size int) *KVEventBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	b := &KVEventBatch{TS: 1764000000.25, DataParallelRank: SomeInt(0)}
	for range events {
		e := KVEvent{Kind: KVBlockStored, BlockSize: int64(size), Medium: SomeString("GPU"),
			Parent: KVBlockHash(rng.Uint64()), HasParent: true}
		for range blocks {
			e.BlockHashes = append(e.BlockHashes, KVBlockHash(rng.Uint64()))
			for range size {
				e.TokenIDs = append(e.TokenIDs, rng.Int64N(150_000))
			}
		}
		b.Events = append(b.Events, e)
	}
	return b
}

// BenchmarkKVDecode decodes a 32-event batch of 4 blocks of 16 tokens (128 blocks)
// in each encoding shape and reports blocks/s on one core.
func BenchmarkKVDecode(b *testing.B) {
	const events, blocks, size = 32, 4, 16
	for _, enc := range []KVEncoding{KVEncodingV011, KVEncodingV021, KVEncodingMap} {
		b.Run(enc.String(), func(b *testing.B) {
			payload := AppendKVEventBatch(nil, enc, kvBenchBatch(events, blocks, size))
			var d KVBatchDecoder
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			cpu := kvCPUTime()
			for b.Loop() {
				if _, err := d.Decode(payload); err != nil {
					b.Fatal(err)
				}
			}
			kvReportBlocks(b, events*blocks, kvCPUTime()-cpu)
		})
	}
}

// BenchmarkKVEncode is the mock engine's side.
func BenchmarkKVEncode(b *testing.B) {
	const events, blocks, size = 32, 4, 16
	batch := kvBenchBatch(events, blocks, size)
	for _, enc := range []KVEncoding{KVEncodingV021, KVEncodingMap} {
		b.Run(enc.String(), func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			cpu := kvCPUTime()
			for b.Loop() {
				buf = AppendKVEventBatch(buf[:0], enc, batch)
			}
			b.SetBytes(int64(len(buf)))
			kvReportBlocks(b, events*blocks, kvCPUTime()-cpu)
		})
	}
}

// kvReportBlocks reports blocks per wall second and per CPU second: on a loaded
// shared machine the wall rate mostly measures the neighbours, the CPU rate what the
// work costs.
func kvReportBlocks(b *testing.B, perOp int, cpu time.Duration) {
	n := float64(perOp * b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "blocks/s")
	if cpu > 0 {
		b.ReportMetric(n/cpu.Seconds(), "blocks/cpu-s")
	}
}

// kvCPUTime is the process's user+system CPU time.
func kvCPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
