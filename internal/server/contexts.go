package server

import (
	"sync"
	"sync/atomic"
)

// contextLens holds each ready engine's registered max_model_len (copy on write:
// read per request, written when an engine comes or goes).
type contextLens struct {
	mu sync.Mutex
	m  atomic.Pointer[map[int]int64]
}

// set records rank's context length; 0 removes it.
func (c *contextLens) set(rank int, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[int]int64{}
	if cur := c.m.Load(); cur != nil {
		for k, v := range *cur {
			next[k] = v
		}
	}
	if n > 0 {
		next[rank] = n
	} else {
		delete(next, rank)
	}
	c.m.Store(&next)
}

// largest returns rank's context length, or for rank < 0 the largest of them;
// 0 when unknown.
func (c *contextLens) largest(rank int) int64 {
	cur := c.m.Load()
	if cur == nil {
		return 0
	}
	if rank >= 0 {
		return (*cur)[rank]
	}
	var best int64
	for _, v := range *cur {
		best = max(best, v)
	}
	return best
}
