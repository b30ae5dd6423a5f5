package wire

import "sync"

// Encode buffers travel from the dispatcher (which encodes an ADD) to an engine's
// writer goroutine (which sends it) and come back here after the socket write, so the
// steady state allocates no encode buffers. Whoever sends a buffer owns it until it
// calls PutBuffer; a buffer is never used after being put back.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// holders recycles the *[]byte boxes the pool stores. Buffers travel as plain []byte
// (GetBuffer's callers never see the box), so PutBuffer needs a box to put a buffer in;
// taking an empty one here instead of writing `&b` keeps the round trip free of the
// 24-byte slice-header allocation it would otherwise cost per request.
var holders = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuffer keeps one huge prompt from pinning memory in the pool forever.
const maxPooledBuffer = 1 << 20

// GetBuffer returns an empty buffer with spare capacity.
func GetBuffer() []byte {
	p := bufPool.Get().(*[]byte)
	b := (*p)[:0]
	*p = nil
	holders.Put(p)
	return b
}

// PutBuffer hands a buffer back for reuse.
func PutBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBuffer {
		return
	}
	p := holders.Get().(*[]byte)
	*p = b[:0]
	bufPool.Put(p)
}
