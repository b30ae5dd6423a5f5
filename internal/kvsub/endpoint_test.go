package kvsub

import (
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		ep     string
		rank   int
		remote string
		replay bool
		want   Resolved
		err    string
	}{
		{"tcp://*:5557", 0, "10.0.0.5", false, Resolved{Addr: "tcp://10.0.0.5:5557"}, ""},
		{"tcp://*:5557", 3, "10.0.0.5", false, Resolved{Addr: "tcp://10.0.0.5:5560"}, ""},
		{"tcp://0.0.0.0:5557", 1, "127.0.0.1", false, Resolved{Addr: "tcp://127.0.0.1:5558"}, ""},
		{"tcp://[::]:5557", 1, "::1", false, Resolved{Addr: "tcp://[::1]:5558"}, ""},
		{"tcp://*:5558", 2, "h", true, Resolved{Addr: "tcp://h:5560"}, ""},
		// A concrete host: the engine's PUB connects to it, so switchyard binds.
		{"tcp://10.0.0.9:6000", 1, "", false, Resolved{Addr: "tcp://10.0.0.9:6001", Bind: true}, ""},
		// A replay ROUTER is always bound by the engine.
		{"tcp://10.0.0.9:6001", 1, "", true, Resolved{Addr: "tcp://10.0.0.9:6002"}, ""},
		{"ipc:///tmp/kv", 0, "", false, Resolved{Addr: "ipc:///tmp/kv"}, ""},
		{"ipc:///tmp/kv", 1, "", false, Resolved{}, "cannot use ipc"},
		{"inproc://kv", 0, "", false, Resolved{}, "inproc"},
		{"tcp://*:5557", 0, "", false, Resolved{}, "wildcard"},
		{"tcp://*:65535", 1, "h", false, Resolved{}, "bad port"},
		{"udp://h:1", 0, "", false, Resolved{}, "scheme"},
		{"h:1", 0, "", false, Resolved{}, "want tcp"},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.ep, tt.rank, tt.remote, tt.replay)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s rank %d: err %v, want %q", tt.ep, tt.rank, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s rank %d: %+v %v, want %+v", tt.ep, tt.rank, got, err, tt.want)
		}
	}
}
