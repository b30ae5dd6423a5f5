package json

import (
	"strconv"
	"testing"
)

// BenchmarkDecode decodes server's benchmark bodies with every decoder.
func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{32, 4096} {
		body := benchBody(n)
		for _, d := range decoders {
			b.Run(d.name+"/prompt="+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if r := d.decode(body); !r.ok || len(r.prompt) != n {
						b.Fatal("decode failed")
					}
				}
			})
		}
	}
}
