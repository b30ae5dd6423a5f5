package wire

import "testing"

// The hot paths in every layout, to compare with the single-layout benchmarks above
// (the native layout is what they measure):
//
//	go test -run '^$' -bench 'Layout' -benchmem ./wire/
//
// benchAdd sets nothing an older release lacks but its EOS id, which v0.11-v0.15
// carry at EngineCoreRequest.eos_token_id.

func BenchmarkLayoutDecodeOutputs256(b *testing.B) {
	for _, l := range BuiltinLayouts() {
		b.Run(l.Name, func(b *testing.B) {
			body, _, err := l.AppendOutputs(nil, benchOutputs())
			if err != nil {
				b.Fatal(err)
			}
			frames := [][]byte{body}
			d := OutputsDecoder{Layout: l}
			var o EngineCoreOutputs
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(frames, &o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/entry")
		})
	}
}

func BenchmarkLayoutEncodeAdd1000(b *testing.B) {
	for _, l := range BuiltinLayouts() {
		b.Run(l.Name, func(b *testing.B) {
			q := benchAdd()
			q.Sampling.SkipReadingPrefixCache = OptBool{} // a v0.11 engine has no such key
			buf := make([]byte, 0, 8192)
			b.ReportAllocs()
			for b.Loop() {
				body, _, err := l.AppendAdd(buf[:0], q)
				if err != nil {
					b.Fatal(err)
				}
				buf = body
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkLayoutDecodeAdd1000(b *testing.B) {
	for _, l := range BuiltinLayouts() {
		b.Run(l.Name, func(b *testing.B) {
			q := benchAdd()
			q.Sampling.SkipReadingPrefixCache = OptBool{}
			body, _, err := l.AppendAdd(nil, q)
			if err != nil {
				b.Fatal(err)
			}
			frames := [][]byte{body}
			var r EngineCoreRequest
			b.ReportAllocs()
			for b.Loop() {
				if err := l.DecodeAdd(frames, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLayoutEncodeOutputs256(b *testing.B) {
	for _, l := range BuiltinLayouts() {
		b.Run(l.Name, func(b *testing.B) {
			o := benchOutputs()
			buf := make([]byte, 0, 32<<10)
			b.ReportAllocs()
			for b.Loop() {
				body, _, err := l.AppendOutputs(buf[:0], o)
				if err != nil {
					b.Fatal(err)
				}
				buf = body
			}
		})
	}
}
