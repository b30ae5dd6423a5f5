package server

import (
	"strings"
	"testing"
)

func TestClientTokenRequiredOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		keys        []string
		ok          bool
	}{
		{"tcp://0.0.0.0:5570", "", []string{"k"}, false},
		{"tcp://*:5570", "", []string{"k"}, false},
		{"tcp://10.1.2.3:5570", "", []string{"k"}, false},
		{"tcp://frontend.internal:5570", "", []string{"k"}, false},
		{"tcp://0.0.0.0:5570", "t", []string{"k"}, true},
		{"tcp://0.0.0.0:5570", "", nil, true},
		{"tcp://127.0.0.1:5570", "", []string{"k"}, true},
		{"tcp://[::1]:5570", "", []string{"k"}, true},
		{"tcp://localhost:5570", "", []string{"k"}, true},
		{"ipc:///tmp/sy.sock", "", []string{"k"}, true},
		{"", "", []string{"k"}, true},
		{"tcp://127.0.0.1:5570", "a b", nil, false},
	} {
		c := DefaultConfig()
		c.ClientAddress, c.ClientToken, c.APIKeys, c.AdminToken = tc.addr, tc.token, tc.keys, "admin"
		err := c.checkClientToken()
		if (err == nil) != tc.ok {
			t.Errorf("%s token %q keys %v: %v", tc.addr, tc.token, tc.keys, err)
		}
		if err != nil && !strings.Contains(err.Error(), "client-token") {
			t.Errorf("%s: error does not name the flag: %v", tc.addr, err)
		}
	}
}
