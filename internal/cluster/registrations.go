package cluster

import (
	"context"
	"strconv"
	"sync"
)

// Registrations keeps engines' input registrations in etcd
// (PREFIX/registrations/RANK) for frontend.RegistrationStore: a vLLM engine
// registers on each frontend's input once, when it starts, so a frontend
// restarted under running engines takes the registration the others saw.
type Registrations struct {
	m  *Member
	mu sync.Mutex
	// last is what this frontend last wrote per rank: every frontend sees
	// the same frames, and an unchanged one is not written again.
	last map[int]string
}

// Registrations returns the member's registration store.
func (m *Member) Registrations() *Registrations {
	return &Registrations{m: m, last: make(map[int]string)}
}

// Saw implements frontend.RegistrationStore: the write runs in the
// background (it is called from the frontend's input loop).
func (r *Registrations) Saw(rank int, frame []byte) {
	r.mu.Lock()
	if r.last[rank] == string(frame) {
		r.mu.Unlock()
		return
	}
	r.last[rank] = string(frame)
	r.mu.Unlock()
	stored := r.m.spawn(func(ctx context.Context) {
		if _, err := r.m.cfg.Client.Put(ctx, r.m.cfg.key("registrations", strconv.Itoa(rank)), string(frame)); err != nil {
			r.m.log.Warn("cluster: engine registration not stored; a restart of this frontend would not find it", "rank", rank, "err", err)
			r.mu.Lock()
			delete(r.last, rank)
			r.mu.Unlock()
		}
	})
	if !stored {
		r.mu.Lock()
		delete(r.last, rank)
		r.mu.Unlock()
	}
}

// Known implements frontend.RegistrationStore.
func (r *Registrations) Known(ctx context.Context, rank int) ([]byte, bool) {
	ctx, cancel := r.m.bound(ctx, callTimeout)
	defer cancel()
	resp, err := r.m.cfg.Client.Get(ctx, r.m.cfg.key("registrations", strconv.Itoa(rank)))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false
	}
	return resp.Kvs[0].Value, true
}
