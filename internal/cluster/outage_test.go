package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// TestCloseDuringEtcdOutage: with etcd paused (connections open, nothing
// answers) past the lease TTL, the leader has lost its session and is
// asking for a new lease; cancelling its campaign returns, and Close
// returns, each within a few seconds, with a background write pending too.
func TestCloseDuringEtcdOutage(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, memberConfig(ownClient(t, c), "/out/", "a"))
	if err != nil {
		t.Fatal(err)
	}
	lctx, stopLead := context.WithCancel(context.Background())
	elected, lost := make(chan struct{}, 1), make(chan struct{}, 1)
	led := make(chan struct{})
	go func() {
		defer close(led)
		m.Lead(lctx, func(ctx context.Context) {
			elected <- struct{}{}
			<-ctx.Done()
			lost <- struct{}{}
		})
	}()
	testwait.Recv(t, elected, "the only member to lead")
	c.Pause(0)
	defer c.Resume(0)
	testwait.Recv(t, lost, "the leadership to end with the lease")
	m.Registrations().Saw(0, []byte("frame")) // a write that cannot complete
	time.Sleep(1500 * time.Millisecond)       // the member is retrying its session
	began := time.Now()
	stopLead()
	testwait.RecvWithin(t, led, 8*time.Second, "Lead to return once cancelled, etcd paused")
	testwait.Func(t, "Close with etcd paused", func() { m.Close() })
	if d := time.Since(began); d > 8*time.Second {
		t.Errorf("Lead and Close took %v with etcd paused", d)
	}
	t.Logf("etcd paused: Lead and Close returned %v after the stop", time.Since(began).Round(time.Millisecond))
}
