package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdStore is a [Store] in etcd. Under its prefix every dp rank is one key
// (dp/0000000007 -> the rank's JSON record) and one key, head, is rewritten
// by every commit. A commit is one etcd transaction: "if head's
// ModRevision is still the one I read, write my ranks and head", so a
// registration, a generation bump or a takeover lands whole or not at all,
// and never over a change it did not see. Registrations are rare (one per
// worker start), so serializing them on one key costs nothing that matters
// and buys decisions that span dp ranks (an engine id moving between ranks).
type EtcdStore struct {
	cli    *clientv3.Client
	prefix string
}

// DefaultEtcdPrefix is where serve keeps the registry.
const DefaultEtcdPrefix = "/switchyard/registry/"

// NewEtcdStore keeps the registry under prefix (DefaultEtcdPrefix when
// empty) through cli, which the caller owns and closes.
func NewEtcdStore(cli *clientv3.Client, prefix string) *EtcdStore {
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &EtcdStore{cli: cli, prefix: prefix}
}

func (e *EtcdStore) head() string { return e.prefix + "head" }

func (e *EtcdStore) key(dp int) string { return fmt.Sprintf("%sdp/%010d", e.prefix, dp) }

// dpOf parses a rank key; ok is false for head and anything foreign.
func (e *EtcdStore) dpOf(key []byte) (int, bool) {
	rest, found := strings.CutPrefix(string(key), e.prefix+"dp/")
	if !found {
		return 0, false
	}
	dp, err := strconv.Atoi(rest)
	return dp, err == nil
}

// Load implements [Store].
func (e *EtcdStore) Load(ctx context.Context) (StoreState, error) {
	resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return StoreState{}, err
	}
	st := StoreState{Full: true}
	for _, kv := range resp.Kvs {
		if string(kv.Key) == e.head() {
			st.Rev = kv.ModRevision
			continue
		}
		if dp, ok := e.dpOf(kv.Key); ok {
			st.Records = append(st.Records, StoreRecord{DP: dp, Data: kv.Value})
		}
	}
	return st, nil
}

// Head implements [Store].
func (e *EtcdStore) Head(ctx context.Context) (int64, error) {
	resp, err := e.cli.Get(ctx, e.head(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

// commitAttempt bounds one transaction: during an etcd leader election a
// write can hang until the server's own timeout (seconds); a fresh attempt
// reaches the new leader sooner.
const commitAttempt = time.Second

// Commit implements [Store].
func (e *EtcdStore) Commit(ctx context.Context, rev int64, recs []StoreRecord) (int64, error) {
	ops := make([]clientv3.Op, 0, len(recs)+1)
	for _, r := range recs {
		if r.Data == nil {
			ops = append(ops, clientv3.OpDelete(e.key(r.DP)))
		} else {
			ops = append(ops, clientv3.OpPut(e.key(r.DP), string(r.Data)))
		}
	}
	ops = append(ops, clientv3.OpPut(e.head(), strconv.FormatInt(rev, 10)))
	actx, cancel := context.WithTimeout(ctx, commitAttempt)
	defer cancel()
	resp, err := e.cli.Txn(actx).
		If(clientv3.Compare(clientv3.ModRevision(e.head()), "=", rev)).
		Then(ops...).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, ErrStoreConflict
	}
	return resp.Header.Revision, nil
}

// Watch implements [Store]. It re-watches after errors and, when etcd has
// compacted the revisions it needed, reloads everything.
func (e *EtcdStore) Watch(ctx context.Context, rev int64, apply func(StoreState)) {
	for ctx.Err() == nil {
		// RequireLeader: a member cut off from the others ends the watch
		// instead of going silent.
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				lctx, lcancel := context.WithTimeout(ctx, storeTimeout)
				st, err := e.Load(lctx)
				lcancel()
				if err == nil {
					apply(st)
					rev = st.Rev
				}
				break
			}
			if resp.Err() != nil {
				break
			}
			st := StoreState{Rev: rev}
			for _, ev := range resp.Events {
				if string(ev.Kv.Key) == e.head() {
					st.Rev = max(st.Rev, ev.Kv.ModRevision)
					continue
				}
				dp, ok := e.dpOf(ev.Kv.Key)
				if !ok {
					continue
				}
				rec := StoreRecord{DP: dp}
				if ev.Type == clientv3.EventTypePut {
					rec.Data = ev.Kv.Value
				}
				st.Records = append(st.Records, rec)
			}
			if st.Rev > rev {
				rev = st.Rev
				apply(st)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
