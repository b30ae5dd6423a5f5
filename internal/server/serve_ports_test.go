package server

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A port that is already taken makes Start return an error naming the address
// (it used to panic: the deferred teardown ran on the nil result), and leaves
// no ipc directory behind.
func TestStartPortTaken(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config, string)
	}{
		{"http", func(c *Config, a string) { c.HTTPAddress = a }},
		{"client", func(c *Config, a string) { c.ClientAddress = "tcp://" + a }},
		{"bootstrap", func(c *Config, a string) { c.BootstrapAddress = a }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // the frontend's ipc dir goes here
			cfg := DefaultConfig()
			cfg.HTTPAddress = "127.0.0.1:0"
			cfg.ClientAddress = "tcp://127.0.0.1:0"
			cfg.MockStep = time.Millisecond
			tt.mutate(&cfg, ln.Addr().String())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Start(ctx, cfg)
			if err == nil {
				s.Shutdown(ctx)
				t.Fatal("Start succeeded on a taken port")
			}
			if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), ln.Addr().String()) {
				t.Errorf("error %q: want address already in use naming %s", err, ln.Addr())
			}
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Errorf("left behind in TMPDIR: %v", ents)
			}
		})
	}
}
