package wire

import "testing"

// BenchmarkBufferRoundTrip is the encode-buffer cycle of every ADD and ABORT: taken by
// the dispatcher, given back by the engine's writer after the socket write.
func BenchmarkBufferRoundTrip(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		buf := GetBuffer()
		buf = append(buf, 1, 2, 3)
		PutBuffer(buf)
	}
}

func TestBufferRoundTripKeepsCapacity(t *testing.T) {
	big := make([]byte, 0, 8192)
	PutBuffer(big)
	PutBuffer(make([]byte, 0, maxPooledBuffer+1)) // too large: dropped, never returned
	for range 4 {
		b := GetBuffer()
		if len(b) != 0 {
			t.Fatalf("GetBuffer returned %d bytes, want an empty buffer", len(b))
		}
		if cap(b) > maxPooledBuffer {
			t.Fatalf("GetBuffer returned a buffer of capacity %d above the pool's bound", cap(b))
		}
		PutBuffer(b)
	}
}
