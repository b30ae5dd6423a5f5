package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NameHeldError refuses a frontend whose name a live frontend holds: two
// frontends under one name would share one client index, so each would
// receive the other's outputs and abort them as orphans.
type NameHeldError struct {
	Name   string
	Holder MemberInfo
}

func (e *NameHeldError) Error() string {
	h := e.Holder
	return fmt.Sprintf("cluster: frontend name %q is held by a live frontend (host %q, input %s, http %q, started %s): "+
		"give this one another frontend name, or stop that one first",
		e.Name, h.Host, h.Input, h.HTTP, h.Started.Format(time.RFC3339))
}

// claim writes the member record under lease only if no other frontend's
// record is there (create-if-absent, one transaction): the leased record is
// the name's claim, so a second frontend with the same name is refused while
// the first renews its lease. This member's own record under an earlier
// lease (a session renewed before etcd dropped the old one) is taken over.
func (m *Member) claim(ctx context.Context, lease clientv3.LeaseID) error {
	key := m.cfg.key("members", m.cfg.Name)
	b, _ := json.Marshal(m.info)
	for range 8 {
		resp, err := m.cfg.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue // its lease ended meanwhile
		}
		if !bytes.Equal(kvs[0].Value, b) {
			var holder MemberInfo
			_ = json.Unmarshal(kvs[0].Value, &holder)
			return &NameHeldError{Name: m.cfg.Name, Holder: holder}
		}
		// Ours (the record holds this run's start time): move it to lease.
		tr, err := m.cfg.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
	}
	return errors.New("cluster: member record: too many concurrent changes")
}

// firstSession starts the member's first session. A name held by another
// record is waited for as long as that record's lease could outlive a
// frontend killed with -9 (its granted TTL and a second): a restart right
// after a kill is let in, a second live frontend is refused.
func (m *Member) firstSession(ctx context.Context) error {
	var deadline time.Time
	for {
		_, err := m.session(ctx)
		var held *NameHeldError
		if !errors.As(err, &held) {
			return err
		}
		if deadline.IsZero() {
			ttl := m.holderTTL(ctx)
			deadline = time.Now().Add(ttl + time.Second)
			m.log.Warn("cluster: frontend name held; waiting in case its holder was killed and its lease is running out",
				"name", m.cfg.Name, "holder_host", held.Holder.Host, "holder_http", held.Holder.HTTP, "wait", ttl+time.Second)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// holderTTL is the granted TTL of the lease under the name's record (the
// holder may run another --etcd-lease-ttl), this member's TTL when unknown.
func (m *Member) holderTTL(ctx context.Context) time.Duration {
	def := time.Duration(m.cfg.TTL) * time.Second
	gctx, cancel := m.bound(ctx, callTimeout)
	defer cancel()
	resp, err := m.cfg.Client.Get(gctx, m.cfg.key("members", m.cfg.Name))
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return def
	}
	tl, err := m.cfg.Client.TimeToLive(gctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || tl.GrantedTTL <= 0 {
		return def
	}
	return time.Duration(tl.GrantedTTL) * time.Second
}

// liveHolder returns the member record under this member's name, if a live
// frontend holds it.
func (m *Member) liveHolder(ctx context.Context) (MemberInfo, bool) {
	gctx, cancel := m.bound(ctx, callTimeout)
	defer cancel()
	resp, err := m.cfg.Client.Get(gctx, m.cfg.key("members", m.cfg.Name))
	if err != nil || len(resp.Kvs) == 0 {
		return MemberInfo{}, false
	}
	var h MemberInfo
	return h, json.Unmarshal(resp.Kvs[0].Value, &h) == nil
}
