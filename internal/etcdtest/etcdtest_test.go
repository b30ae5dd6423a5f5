package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestClientTalksToDebianEtcd checks that the v3.7 Go client works against
// Debian's etcd 3.4 server for everything switchyard uses: KV, transactions,
// leases, watches and the concurrency election, and across a leader kill.
func TestClientTalksToDebianEtcd(t *testing.T) {
	c := Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("k"), "=", "v")).Then(clientv3.OpPut("k", "w")).Commit()
	if err != nil || !r.Succeeded {
		t.Fatalf("txn: %v %v", r, err)
	}
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, "w")
	if _, err := cli.Put(ctx, "w", "1"); err != nil {
		t.Fatal(err)
	}
	if ev := testwait.Recv(t, wch, "the watch event for the put of w"); len(ev.Events) != 1 {
		t.Fatalf("watch: %+v", ev)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := concurrency.NewElection(s, "/el")
	if err := e.Campaign(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	l, err := e.Leader(ctx)
	if err != nil || string(l.Kvs[0].Value) != "me" {
		t.Fatalf("leader %v %v", l, err)
	}
	lead := c.Leader(t)
	c.Kill(lead)
	// The two survivors keep a quorum.
	// A write in flight during the election may time out ("etcdserver:
	// request timed out"); the client does not retry writes by itself.
	start := time.Now()
	for {
		actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := cli.Put(actx, "after", "kill")
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("put after leader kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes resumed %v after the leader was killed", time.Since(start))
}
