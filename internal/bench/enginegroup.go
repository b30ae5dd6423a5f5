package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// engineGroup is the bench's engines for one phase: goroutines in this process, or
// child processes (Config.EnginesAsProcesses) that write their records to a file
// when told to stop.
type engineGroup struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	recs   []EngineRecord
	errs   []error

	received atomic.Int64 // ADDs that reached the in-process engines
	sent     atomic.Int64 // output messages the in-process engines wrote

	procs []*exec.Cmd
	files []string
	dir   string
}

func startEngines(ctx context.Context, cfg Config, opt Options, handshake string) (*engineGroup, error) {
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &engineGroup{cancel: cancel}
	if cfg.EnginesAsProcesses {
		if len(opt.EngineCommand) == 0 {
			cancel()
			return nil, &ConfigError{Field: "engines_as_processes", Msg: "no engine command to start children with"}
		}
		dir, err := os.MkdirTemp("", "swbench-engines-")
		if err != nil {
			cancel()
			return nil, fmt.Errorf("bench: %w", err)
		}
		g.dir = dir
		for rank := range cfg.Engines {
			file := filepath.Join(dir, fmt.Sprintf("rank-%d.json", rank))
			args := append(append([]string(nil), opt.EngineCommand[1:]...), EngineFlags(cfg, rank, handshake, file)...)
			cmd := exec.Command(opt.EngineCommand[0], args...)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				g.stop()
				return nil, fmt.Errorf("bench: start engine %d: %w", rank, err)
			}
			g.procs = append(g.procs, cmd)
			g.files = append(g.files, file)
		}
		return g, nil
	}
	for rank := range cfg.Engines {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			recs, err := RunEngine(ectx, EngineConfig{
				Rank: rank, Handshake: handshake, TokensPerStep: cfg.TokensPerStep, StepTime: cfg.StepTime,
				Received: &g.received, Sent: &g.sent, Layout: cfg.layout(),
			})
			g.mu.Lock()
			g.recs = append(g.recs, recs...)
			if err != nil && ectx.Err() == nil {
				g.errs = append(g.errs, err)
			}
			g.mu.Unlock()
		}()
	}
	return g, nil
}

// EngineFlags are the flags `switchyard bench engine` takes for rank (see
// cmd/switchyard/bench.go); the child writes its records to file on SIGTERM.
func EngineFlags(cfg Config, rank int, handshake, file string) []string {
	return []string{
		"--handshake-address", handshake,
		"--data-parallel-rank", strconv.Itoa(rank),
		"--tokens-per-step", strconv.Itoa(cfg.TokensPerStep),
		"--step-time", cfg.StepTime.String(),
		"--records", file,
		"--vllm-layout", cfg.layout().Name,
	}
}

// WriteRecords is the child engine's side of EngineFlags' --records.
func WriteRecords(file string, recs []EngineRecord) error {
	b, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// stop ends the engines and returns every record they kept.
func (g *engineGroup) stop() ([]EngineRecord, error) {
	g.cancel()
	g.wg.Wait()
	for i, p := range g.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
			g.errs = append(g.errs, fmt.Errorf("bench: engine %d did not stop on SIGTERM", i))
			continue
		}
		b, err := os.ReadFile(g.files[i])
		if err != nil {
			g.errs = append(g.errs, fmt.Errorf("bench: engine %d records: %w", i, err))
			continue
		}
		var recs []EngineRecord
		if err := json.Unmarshal(b, &recs); err != nil {
			g.errs = append(g.errs, fmt.Errorf("bench: engine %d records: %w", i, err))
			continue
		}
		g.recs = append(g.recs, recs...)
	}
	if g.dir != "" {
		os.RemoveAll(g.dir)
	}
	return g.recs, errors.Join(g.errs...)
}
