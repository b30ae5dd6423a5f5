// Package etcdtest starts a real etcd cluster (Debian's etcd-server binary,
// /usr/bin/etcd, or $SWITCHYARD_ETCD) on loopback ports in a temp dir, for
// tests of the etcd-backed registry store, the frontend membership and
// election, and the scale-out e2e run. A fake would prove nothing about
// transactions, leases or leader loss, so there is none.
package etcdtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd binary to run, or "" when there is none.
func Binary() string {
	if p := os.Getenv("SWITCHYARD_ETCD"); p != "" {
		return p
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	return ""
}

// Require returns the etcd binary; without one the test fails under CI=true
// (CI installs etcd-server) and skips elsewhere.
func Require(t testing.TB) string {
	t.Helper()
	b := Binary()
	if b == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("etcd not found: apt-get install -y etcd-server (CI installs it in .ci/run)")
		}
		t.Skip("etcd not found: apt-get install -y etcd-server")
	}
	return b
}

// Member is one etcd process.
type Member struct {
	Name      string
	ClientURL string
	peerURL   string
	dir       string
	cmd       *exec.Cmd
	done      chan struct{}
	log       *os.File
}

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	bin     string
	Members []*Member
	initial string
}

// Start runs an n-member cluster and waits until it answers. It is stopped
// at the end of the test.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Require(t)
	dir := t.TempDir()
	c := &Cluster{t: t, bin: bin}
	var parts []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: "http://" + freeAddr(t),
			peerURL:   "http://" + freeAddr(t),
			dir:       filepath.Join(dir, fmt.Sprintf("m%d", i)),
		}
		parts = append(parts, m.Name+"="+m.peerURL)
		c.Members = append(c.Members, m)
	}
	c.initial = strings.Join(parts, ",")
	for _, m := range c.Members {
		c.startMember(m, "new")
	}
	t.Cleanup(c.Stop)
	c.waitHealthy(30 * time.Second)
	return c
}

func (c *Cluster) startMember(m *Member, state string) {
	c.t.Helper()
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	lf, err := os.OpenFile(m.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin,
		"--name", m.Name,
		"--data-dir", m.dir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", c.initial,
		"--initial-cluster-state", state,
		"--initial-cluster-token", "switchyard-test",
		// Fast elections: the tests measure failover on loopback. Pre-vote (the
		// default from etcd 3.5; Debian's 3.4 has it off): on a loaded machine a
		// member that missed heartbeats would otherwise start an election that
		// deposes a working leader, and two survivors of a leader kill could
		// trade leadership for longer than a registration waits.
		"--heartbeat-interval", "50",
		"--election-timeout", "500",
		"--pre-vote",
		"--unsafe-no-fsync",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start etcd: %v", err)
	}
	m.cmd, m.log, m.done = cmd, lf, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.done)
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// Client returns a client of the whole cluster, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func (c *Cluster) waitHealthy(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for _, m := range c.Members {
		for {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err = cli.Get(ctx, "health")
				cancel()
				cli.Close()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("etcd member %s not healthy after %v: %v (log %s.log)", m.Name, within, err, m.dir)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Leader returns the index of the current raft leader.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.Members {
			if m.cmd == nil {
				continue
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.ClientURL)
			cancel()
			cli.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no etcd leader")
	return -1
}

// Kill sends SIGKILL to member i and waits for it to exit.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.Members[i]
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	testwait.Recv(c.t, m.done, "etcd member "+m.Name+" to exit after SIGKILL")
	m.cmd = nil
	m.log.Close()
}

// Pause stops member i with SIGSTOP: its connections stay open and nothing
// answers, the way a hung or partitioned etcd looks to its clients (a kill
// refuses connections at once). Stop and Kill end a paused member too.
func (c *Cluster) Pause(i int) {
	c.t.Helper()
	if m := c.Members[i]; m.cmd != nil {
		if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			c.t.Fatalf("pause etcd member %s: %v", m.Name, err)
		}
	}
}

// Resume continues a paused member.
func (c *Cluster) Resume(i int) {
	c.t.Helper()
	if m := c.Members[i]; m.cmd != nil {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts a killed member again on its data dir.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.startMember(c.Members[i], "existing")
}

// Stop kills every member. A failed test gets the end of each member's log:
// the elections and slow requests behind a store error are only there.
func (c *Cluster) Stop() {
	for i := range c.Members {
		c.Kill(i)
	}
	if c.t.Failed() {
		for _, m := range c.Members {
			c.t.Logf("etcd member %s, the end of its log:\n%s", m.Name, logTail(m.dir+".log", 40))
		}
	}
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// FreeLoopback returns a free loopback HOST:PORT below the ephemeral range
// (ip_local_port_range starts at 32768 by default). Addresses fixed before
// the processes bind them (etcd members, a scale-out deployment's sockets)
// must not be picked with :0: such a port can meanwhile become the source
// port of an outgoing connection (etcd clients make many), which a port out
// of that range cannot.
func FreeLoopback(t testing.TB) string {
	t.Helper()
	for range 1000 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatal("no free loopback port in [20000, 32000)")
	return ""
}

func freeAddr(t testing.TB) string { return FreeLoopback(t) }
