package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultPrefix is where a deployment keeps its keys; several deployments
// can share one etcd under distinct prefixes.
const DefaultPrefix = "/switchyard/"

// DefaultTTL is the lease of a member and of the leadership, in seconds: a
// frontend killed with -9 is seen gone, and the coordinator role moves,
// about this long after.
const DefaultTTL = 2

// callTimeout bounds one etcd call made on the member's own behalf (a lease
// grant, a record written in the background): with etcd unreachable a call
// would otherwise wait for as long as its context lives.
const callTimeout = 5 * time.Second

// revokeTimeout bounds the lease revoke at Close: an unreachable etcd lets
// the lease expire by itself after the TTL anyway.
const revokeTimeout = 2 * time.Second

// Config configures one frontend's membership.
type Config struct {
	// Client is the etcd client; the caller owns it.
	Client *clientv3.Client
	// Prefix of every key; DefaultPrefix when empty.
	Prefix string
	// Name identifies the frontend across restarts (its client index is
	// bound to it).
	Name string
	// Input and Output are this frontend's engine-facing input ROUTER and
	// output PULL, as engines reach them.
	Input, Output string
	// HTTP is advertised in the member record (for operators and balancers).
	HTTP string
	// TTL of the member's lease in seconds; DefaultTTL when 0.
	TTL int
	// Logger: nil discards.
	Logger *slog.Logger
}

// MemberInfo is what a live frontend publishes under its lease.
type MemberInfo struct {
	Client
	HTTP string `json:"http,omitempty"`
	// Host is the host name the frontend runs on (names a holder that
	// refuses a second frontend of the same name).
	Host    string    `json:"host,omitempty"`
	Started time.Time `json:"started"`
}

// Member is one frontend in the cluster: its client index, its lease, and
// its candidacy for the leadership.
type Member struct {
	cfg    Config
	log    *slog.Logger
	client Client
	info   MemberInfo

	// life outlives Join's context: the session's keepalives run on it
	// until Close.
	life context.Context
	stop context.CancelFunc
	// closing ends at the start of Close: every etcd call still waiting
	// (a grant while etcd is down) returns, so Close never waits for etcd.
	closing context.Context
	halt    context.CancelFunc

	mu     sync.Mutex // held across a grant: not for callers that must not wait
	sess   *concurrency.Session
	closed bool

	// bg counts background writes (Registrations.Saw): Add under bgMu
	// while !bgClosed, so Close's Wait sees every one.
	bgMu     sync.Mutex
	bgClosed bool
	bg       sync.WaitGroup
}

func (c Config) key(parts ...string) string {
	p := c.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p + strings.Join(parts, "/")
}

// Join takes this frontend's client index (the one it had, or the lowest
// free one, in one etcd transaction) and starts its membership lease.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if cfg.Client == nil || cfg.Name == "" || cfg.Input == "" || cfg.Output == "" {
		return nil, errors.New("cluster: Config needs Client, Name, Input and Output")
	}
	if strings.Contains(cfg.Name, "/") {
		return nil, fmt.Errorf("cluster: frontend name %q must not contain '/'", cfg.Name)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	m := &Member{cfg: cfg, log: cfg.Logger}
	m.life, m.stop = context.WithCancel(context.Background())
	m.closing, m.halt = context.WithCancel(context.Background())
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	c, err := m.place(ctx)
	if err != nil {
		if h, ok := m.liveHolder(ctx); ok {
			// Refused for its addresses, but the cause is a live
			// frontend of the same name (on another host): say so.
			err = &NameHeldError{Name: cfg.Name, Holder: h}
		}
		m.halt()
		m.stop()
		return nil, err
	}
	m.client = c
	host, _ := os.Hostname()
	m.info = MemberInfo{Client: c, HTTP: cfg.HTTP, Host: host, Started: time.Now().UTC()}
	if err := m.firstSession(ctx); err != nil {
		m.halt()
		m.stop()
		return nil, err
	}
	m.log.Info("cluster: joined", "name", cfg.Name, "client_index", c.Index, "input", c.Input, "output", c.Output)
	return m, nil
}

// place assigns the client index by transaction: the name's entry and the
// index's entry are created together only if neither exists, so two
// frontends starting at once never share an index.
func (m *Member) place(ctx context.Context) (Client, error) {
	for attempt := 0; attempt < 32; attempt++ {
		tab, err := m.Table(ctx)
		if err != nil {
			return Client{}, err
		}
		c, isNew, err := tab.Place(m.cfg.Name, m.cfg.Input, m.cfg.Output)
		if err != nil || !isNew {
			return c, err
		}
		b, _ := json.Marshal(c)
		nameKey, idxKey := m.cfg.key("clients", m.cfg.Name), m.cfg.key("client-index", fmt.Sprintf("%05d", c.Index))
		resp, err := m.cfg.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(nameKey), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(idxKey), "=", 0)).
			Then(clientv3.OpPut(nameKey, string(b)), clientv3.OpPut(idxKey, m.cfg.Name)).
			Commit()
		if err != nil {
			return Client{}, err
		}
		if resp.Succeeded {
			return c, nil
		}
	}
	return Client{}, errors.New("cluster: could not take a client index (too many concurrent joins)")
}

// Table reads the client table.
func (m *Member) Table(ctx context.Context) (Table, error) { return ReadTable(ctx, m.cfg) }

// ReadTable reads the client table of cfg's prefix.
func ReadTable(ctx context.Context, cfg Config) (Table, error) {
	resp, err := cfg.Client.Get(ctx, cfg.key("clients")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var t Table
	for _, kv := range resp.Kvs {
		var c Client
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			return nil, fmt.Errorf("cluster: client entry %s: %w", kv.Key, err)
		}
		t = append(t, c)
	}
	return t.Sorted(), nil
}

// Client is this frontend's entry.
func (m *Member) Client() Client { return m.client }

// session returns the live session, starting a new one (and publishing the
// member record under it) when there is none or it expired.
func (m *Member) session(ctx context.Context) (*concurrency.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess != nil {
		select {
		case <-m.sess.Done():
		default:
			return m.sess, nil
		}
	}
	if m.closed {
		return nil, errClosed
	}
	// The grant is ours, not NewSession's: NewSession grants under the
	// session's own context, which lives until Close, so with etcd down it
	// waited for ever and Close (waiting for the caller) with it.
	gctx, cancel := m.bound(ctx, callTimeout)
	defer cancel()
	lease, err := m.cfg.Client.Grant(gctx, int64(m.cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd lease: %w", err)
	}
	s, err := concurrency.NewSession(m.cfg.Client, concurrency.WithTTL(m.cfg.TTL), concurrency.WithLease(lease.ID), concurrency.WithContext(m.life))
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd session: %w", err)
	}
	if err := m.claim(gctx, s.Lease()); err != nil {
		_ = m.revoke(s)
		var held *NameHeldError
		if errors.As(err, &held) {
			return nil, err
		}
		return nil, fmt.Errorf("cluster: member record: %w", err)
	}
	m.sess = s
	return s, nil
}

var errClosed = errors.New("cluster: member closed")

// bound returns ctx limited to d and ended by Close.
func (m *Member) bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	unhook := context.AfterFunc(m.closing, cancel)
	return ctx, func() { unhook(); cancel() }
}

// revoke ends s's keepalives and revokes its lease, waiting at most
// revokeTimeout: the others see this frontend gone at once when etcd
// answers, after the TTL when it does not.
func (m *Member) revoke(s *concurrency.Session) error {
	s.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	_, err := m.cfg.Client.Revoke(ctx, s.Lease())
	return err
}

// spawn runs f in the background until Close, which waits for it; f's
// context ends at Close or after callTimeout. False once closed.
func (m *Member) spawn(f func(ctx context.Context)) bool {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.bgClosed {
		return false
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		ctx, cancel := m.bound(context.Background(), callTimeout)
		defer cancel()
		f(ctx)
	}()
	return true
}

// Members lists the live frontends (their leases held).
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	resp, err := m.cfg.Client.Get(ctx, m.cfg.key("members")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []MemberInfo
	for _, kv := range resp.Kvs {
		var mi MemberInfo
		if json.Unmarshal(kv.Value, &mi) == nil {
			out = append(out, mi)
		}
	}
	return out, nil
}

// Lead campaigns for the leadership until ctx ends. While this member leads,
// duties runs with a context that ends when the leadership does (the
// lease expired: etcd unreachable for a TTL; or ctx ended); duties must
// return promptly then, releasing what it bound. Losing the session starts
// a new one and campaigns again.
func (m *Member) Lead(ctx context.Context, duties func(ctx context.Context)) {
	for ctx.Err() == nil {
		s, err := m.session(ctx)
		if err != nil {
			m.log.Warn("cluster: no etcd session; retrying", "err", err)
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		el := concurrency.NewElection(s, m.cfg.key("leader"))
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-s.Done():
			case <-cctx.Done():
			}
			cancel()
		}()
		b, _ := json.Marshal(m.info)
		if err := el.Campaign(cctx, string(b)); err != nil {
			cancel()
			if ctx.Err() == nil {
				m.log.Warn("cluster: campaign ended", "err", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		m.log.Info("cluster: elected leader: owning the engine handshake and the DP coordinator", "name", m.cfg.Name, "client_index", m.client.Index)
		duties(cctx)
		cancel()
		// Step down cleanly when still possible, so the next leader need not
		// wait for the lease to expire.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = el.Resign(rctx)
		rcancel()
		m.log.Info("cluster: no longer leader", "name", m.cfg.Name)
	}
}

// Leader returns the current leader, ok false when there is none.
func (m *Member) Leader(ctx context.Context) (MemberInfo, bool, error) {
	return readLeader(ctx, m.cfg)
}

func readLeader(ctx context.Context, cfg Config) (MemberInfo, bool, error) {
	resp, err := cfg.Client.Get(ctx, cfg.key("leader")+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return MemberInfo{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return MemberInfo{}, false, nil
	}
	var mi MemberInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &mi); err != nil {
		return MemberInfo{}, false, err
	}
	return mi, true, nil
}

// ObserveLeader calls fn with every change of leader (ok false: none) until
// ctx ends, first with the current one.
func (m *Member) ObserveLeader(ctx context.Context, fn func(leader MemberInfo, ok bool)) {
	var last string
	for ctx.Err() == nil {
		resp, err := m.cfg.Client.Get(ctx, m.cfg.key("leader")+"/", clientv3.WithFirstCreate()...)
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		cur := ""
		var mi MemberInfo
		if len(resp.Kvs) > 0 && json.Unmarshal(resp.Kvs[0].Value, &mi) == nil {
			cur = mi.Name + "@" + string(resp.Kvs[0].Key)
		}
		if cur != last {
			last = cur
			fn(mi, cur != "")
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := m.cfg.Client.Watch(wctx, m.cfg.key("leader")+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for range wch {
			break // any change: read the leader again
		}
		cancel()
		// A watch refused at once (no etcd leader) must not spin.
		sleep(ctx, 20*time.Millisecond)
	}
}

// Close revokes the lease, so the others see this frontend gone, and a new
// leader is elected, at once rather than after the TTL. It returns within
// about revokeTimeout whether etcd answers or not: calls still waiting for
// etcd end first, and the background writes are joined.
func (m *Member) Close() error {
	m.halt()
	m.mu.Lock()
	s := m.sess
	m.sess = nil
	m.closed = true
	m.mu.Unlock()
	var err error
	if s != nil {
		select {
		case <-s.Done():
			// Its keepalives ended: etcd was unreachable for the TTL, so the
			// lease expired (or will) without a revoke that would only wait.
		default:
			err = m.revoke(s)
		}
	}
	m.stop()
	m.bgMu.Lock()
	m.bgClosed = true
	m.bgMu.Unlock()
	m.bg.Wait()
	return err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
