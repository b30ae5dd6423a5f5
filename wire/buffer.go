package wire

import "sync"

// Encode buffers travel from the dispatcher (which encodes an ADD) to an engine's
// writer goroutine (which sends it) and come back here after the socket write, so the
// steady state allocates no encode buffers. Whoever sends a buffer owns it until it
// calls PutBuffer; a buffer is never used after being put back.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBuffer keeps one huge prompt from pinning memory in the pool forever.
const maxPooledBuffer = 1 << 20

// GetBuffer returns an empty buffer with spare capacity.
func GetBuffer() []byte { return (*bufPool.Get().(*[]byte))[:0] }

// PutBuffer hands a buffer back for reuse.
func PutBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBuffer {
		return
	}
	b = b[:0]
	bufPool.Put(&b)
}
