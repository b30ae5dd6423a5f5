package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PublishView writes what view returns (this frontend's engines: state,
// draining, in flight, generation) to PREFIX/views/NAME under the member's
// lease every interval until ctx ends, so every frontend and operator sees
// every frontend's view of the engines, and a dead frontend's view goes
// with its lease.
func (m *Member) PublishView(ctx context.Context, interval time.Duration, view func() any) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var (
		last  string
		lease clientv3.LeaseID
	)
	for {
		// Written when it changed, or when a new session means the old
		// key went with the old lease.
		if s, err := m.session(ctx); err == nil {
			if b, err := json.Marshal(view()); err == nil && (string(b) != last || s.Lease() != lease) {
				pctx, cancel := context.WithTimeout(ctx, interval)
				if _, err := m.cfg.Client.Put(pctx, m.cfg.key("views", m.cfg.Name), string(b), clientv3.WithLease(s.Lease())); err == nil {
					last, lease = string(b), s.Lease()
				}
				cancel()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Views reads every live frontend's published view, by frontend name.
func (m *Member) Views(ctx context.Context) (map[string]json.RawMessage, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.key("views")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), m.cfg.key("views")+"/")] = kv.Value
	}
	return out, nil
}

// Drainer is what deployment-wide drain marks act on: the dispatcher.
type Drainer interface {
	DrainEngine(rank int) error
	UndrainEngine(rank int) error
}

// FollowDrains applies the deployment's drain marks (PREFIX/drain/RANK,
// present = drained, any value: etcdctl put /switchyard/drain/1 x) to d until ctx
// ends, so a drain reaches every frontend, including one started later. The
// marks are applied again every interval: a rank this frontend has not
// seen yet cannot be drained until it comes up. A rank drained locally
// (POST /v1/engines/R/drain) is left alone.
func (m *Member) FollowDrains(ctx context.Context, interval time.Duration, d Drainer) {
	applied := make(map[int]bool)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		gctx, cancel := context.WithTimeout(ctx, interval)
		resp, err := m.cfg.Client.Get(gctx, m.cfg.key("drain")+"/", clientv3.WithPrefix())
		cancel()
		if err == nil {
			want := make(map[int]bool, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				if r, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), m.cfg.key("drain")+"/")); err == nil {
					want[r] = true
				}
			}
			for r := range want {
				if d.DrainEngine(r) == nil && !applied[r] {
					applied[r] = true
					m.log.Info("cluster: engine drained by a deployment-wide mark", "rank", r)
				}
			}
			for r := range applied {
				if !want[r] {
					if d.UndrainEngine(r) == nil {
						m.log.Info("cluster: deployment-wide drain mark removed", "rank", r)
					}
					delete(applied, r)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
