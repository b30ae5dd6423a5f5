package mockengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// lockstep emulates the collective that ties the ranks of a MoE data-parallel
// group (--enable-wave-coordination): in vLLM every forward pass, dummy batches
// included, is an all-reduce over all ranks, so when one rank dies the others
// block in it (until NCCL's watchdog fires minutes later). The mock has no
// NCCL; instead each rank listens on a unix socket in a shared directory
// (Config.LockstepDir, rank-R.sock) and holds a connection to every other
// rank. A rank steps only while it is connected to all of them; a killed rank
// closes its connections at once, so the survivors stop stepping (they still
// read input, so ABORTs are applied and run nothing when the group resumes)
// until it is back.
type lockstep struct {
	dir        string
	rank, size int
	log        *slog.Logger

	ln     net.Listener
	mu     sync.Mutex
	alive  []bool
	conns  map[net.Conn]struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wasUp  bool // the loop's last answer, for logging transitions
}

func lockstepPath(dir string, rank int) string {
	return filepath.Join(dir, fmt.Sprintf("rank-%d.sock", rank))
}

// startLockstep listens for the other ranks and starts dialing them.
func startLockstep(ctx context.Context, dir string, rank, size int, log *slog.Logger) (*lockstep, error) {
	path := lockstepPath(dir, rank)
	_ = os.Remove(path) // a previous run of this rank (killed) left it behind
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("mockengine: lockstep listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &lockstep{dir: dir, rank: rank, size: size, log: log, ln: ln, alive: make([]bool, size),
		conns: map[net.Conn]struct{}{}, cancel: cancel}
	l.alive[rank] = true
	l.wg.Add(1)
	go l.accept()
	for peer := range size {
		if peer != rank {
			l.wg.Add(1)
			go l.dial(ctx, peer)
		}
	}
	return l, nil
}

// track adds c to the set closed by close; false when closing already.
func (l *lockstep) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *lockstep) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// accept holds every peer's connection open until it closes.
func (l *lockstep) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			c.Close()
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			_, _ = io.Copy(io.Discard, c)
			l.untrack(c)
		}()
	}
}

// dial keeps one connection to peer; the peer is alive while it is open.
func (l *lockstep) dial(ctx context.Context, peer int) {
	defer l.wg.Done()
	path := lockstepPath(l.dir, peer)
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil && l.track(c) {
			l.setAlive(peer, true)
			_, _ = io.Copy(io.Discard, c) // returns when the peer dies or we close
			l.setAlive(peer, false)
			l.untrack(c)
			continue
		} else if err == nil {
			c.Close()
			return
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (l *lockstep) setAlive(peer int, up bool) {
	l.mu.Lock()
	l.alive[peer] = up
	l.mu.Unlock()
}

// whole reports whether every rank of the group is connected: only then can a
// collective (a step) complete. It logs when that changes.
func (l *lockstep) whole() bool {
	l.mu.Lock()
	var missing []int
	for r, up := range l.alive {
		if !up {
			missing = append(missing, r)
		}
	}
	l.mu.Unlock()
	up := len(missing) == 0
	if up != l.wasUp {
		l.wasUp = up
		if up {
			l.log.Info("mockengine: lockstep group complete; stepping")
		} else {
			l.log.Warn("mockengine: lockstep peers missing; blocked in the collective", "missing", missing)
		}
	}
	return up
}

func (l *lockstep) close() {
	l.cancel()
	l.ln.Close()
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	l.wg.Wait()
}

var errLockstepDir = errors.New("mockengine: config LockstepDir needs DataParallelSize > 1")
