package server

import (
	"strings"
	"testing"
)

func TestPDConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"off", func(*Config) {}, ""},
		{"embedded mocks", func(c *Config) { c.PD.MockPrefillEngines = 1 }, ""},
		{"real prefill engines", func(c *Config) {
			c.HandshakeAddress = "tcp://127.0.0.1:1"
			c.PD.PrefillHandshakeAddress, c.PD.PrefillDataParallelSize = "tcp://127.0.0.1:2", 2
		}, ""},
		{"bootstrapped prefill", func(c *Config) {
			c.PD.PrefillInputAddress, c.PD.PrefillOutputAddress, c.PD.PrefillDataParallelSize = "ipc:///tmp/a", "ipc:///tmp/b", 2
			c.PD.PrefillStartRank = 1
		}, ""},
		{"bootstrapped prefill without output", func(c *Config) { c.PD.PrefillInputAddress = "ipc:///tmp/a" }, "--prefill-input-address"},
		{"both prefill modes", func(c *Config) {
			c.PD.PrefillHandshakeAddress, c.PD.PrefillInputAddress, c.PD.PrefillOutputAddress = "tcp://127.0.0.1:2", "ipc:///a", "ipc:///b"
		}, "--prefill-handshake-address"},
		{"mock prefill with real decode", func(c *Config) {
			c.HandshakeAddress, c.PD.MockPrefillEngines = "tcp://127.0.0.1:1", 1
		}, "--mock-prefill-engines"},
		{"thresholds without prefill engines", func(c *Config) { c.PD.MinPromptTokens = 5 }, "no prefill engines"},
		{"negative threshold", func(c *Config) { c.PD.MockPrefillEngines, c.PD.PrefillBusyThreshold = 1, -1 }, "negative"},
		{"start rank beyond the size", func(c *Config) {
			c.PD.PrefillInputAddress, c.PD.PrefillOutputAddress, c.PD.PrefillStartRank = "ipc:///a", "ipc:///b", 3
		}, "outside"},
		{"waves", func(c *Config) { c.PD.MockPrefillEngines, c.EnableWaves = 1, true }, "--enable-wave-coordination"},
	} {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.want)
		}
	}
}

func TestKVTransferConfigs(t *testing.T) {
	pre, dec := KVTransferConfigs("", "10.0.0.5:8998")
	if pre != `{"kv_connector":"MooncakeConnector","kv_connector_extra_config":{"bootstrap_server_address":"10.0.0.5:8998"},"kv_role":"kv_producer"}` {
		t.Errorf("prefill: %s", pre)
	}
	if !strings.Contains(dec, `"kv_role":"kv_consumer"`) {
		t.Errorf("decode: %s", dec)
	}
	pre, _ = KVTransferConfigs("NixlConnector", "")
	if pre != `{"kv_connector":"NixlConnector","kv_role":"kv_producer"}` {
		t.Errorf("without a registry: %s", pre)
	}
}
