package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EngineRecord is what the deployment knows of one engine rank in etcd
// (PREFIX/engines/RANK): written by the leader at each handshake, so every
// frontend and operator sees the same generation (one per handshake: an
// engine restarted is a new generation) and who let it in.
type EngineRecord struct {
	Rank       int       `json:"rank"`
	Generation uint64    `json:"generation"`
	State      string    `json:"state"` // "up" once READY was received
	Since      time.Time `json:"since"`
	Leader     string    `json:"leader"` // the frontend that did the handshake
}

// RecordEngineReady bumps rank's generation and marks it up, in one
// transaction (a leader change in between cannot lose a generation).
func (m *Member) RecordEngineReady(ctx context.Context, rank int) (EngineRecord, error) {
	key := m.cfg.key("engines", strconv.Itoa(rank))
	ctx, cancel := m.bound(ctx, callTimeout)
	defer cancel()
	for {
		resp, err := m.cfg.Client.Get(ctx, key)
		if err != nil {
			return EngineRecord{}, err
		}
		var rec EngineRecord
		var modRev int64
		if len(resp.Kvs) > 0 {
			_ = json.Unmarshal(resp.Kvs[0].Value, &rec)
			modRev = resp.Kvs[0].ModRevision
		}
		rec = EngineRecord{Rank: rank, Generation: rec.Generation + 1, State: "up", Since: time.Now().UTC(), Leader: m.cfg.Name}
		b, _ := json.Marshal(rec)
		tr, err := m.cfg.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return EngineRecord{}, err
		}
		if tr.Succeeded {
			return rec, nil
		}
	}
}

// Engines reads every engine record.
func (m *Member) Engines(ctx context.Context) ([]EngineRecord, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.key("engines")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []EngineRecord
	for _, kv := range resp.Kvs {
		var r EngineRecord
		if json.Unmarshal(kv.Value, &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}
