package mockengine

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestOffsetEndpoint(t *testing.T) {
	tests := []struct {
		ep   string
		rank int
		want string
		err  bool
	}{
		{"tcp://*:5557", 0, "tcp://*:5557", false},
		{"tcp://*:5557", 3, "tcp://*:5560", false},
		{"tcp://10.0.0.5:5557", 1, "tcp://10.0.0.5:5558", false},
		{"tcp://[::]:5557", 2, "tcp://[::]:5559", false},
		{"inproc://cache", 2, "inproc://cache_dp2", false},
		{"ipc:///tmp/kv", 0, "ipc:///tmp/kv", false},
		{"ipc:///tmp/kv", 1, "", true}, // vLLM: "must contain 'inproc' or 'tcp'"
		{"tcp://*:port", 1, "", true},
		{"", 4, "", false},
	}
	for _, tt := range tests {
		got, err := OffsetEndpoint(tt.ep, tt.rank)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("OffsetEndpoint(%q, %d) = %q, %v; want %q, error %v", tt.ep, tt.rank, got, err, tt.want, tt.err)
		}
	}
}

func TestParseKVEventsConfig(t *testing.T) {
	def := func(mut func(*KVEventsConfig)) KVEventsConfig {
		k := DefaultKVEventsConfig()
		mut(&k)
		return k
	}
	tests := []struct {
		name, json string
		want       KVEventsConfig
		on, err    bool
	}{
		{"vllm serve's example", `{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": ""}`,
			def(func(k *KVEventsConfig) { k.ReplayEndpoint = "tcp://*:5558" }), true, false},
		{"enabled: zmq on the default endpoint", `{"enable_kv_cache_events": true}`, DefaultKVEventsConfig(), true, false},
		{"not enabled: the null publisher", `{"endpoint": "tcp://*:6000"}`,
			def(func(k *KVEventsConfig) { k.Enable, k.Publisher, k.Endpoint = false, "null", "tcp://*:6000" }), false, false},
		{"sizes and topic", `{"enable_kv_cache_events": true, "buffer_steps": 5, "hwm": 6, "max_queue_size": 7, "topic": "t"}`,
			def(func(k *KVEventsConfig) { k.BufferSteps, k.HWM, k.MaxQueueSize, k.Topic = 5, 6, 7, "t" }), true, false},
		{"explicit null publisher", `{"enable_kv_cache_events": true, "publisher": "null"}`,
			def(func(k *KVEventsConfig) { k.Publisher = "null" }), false, false},
		{"unknown publisher", `{"publisher": "kafka"}`, KVEventsConfig{}, false, true},
		{"unknown field", `{"enable_kv_cache_event": true}`, KVEventsConfig{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKVEventsConfig(tt.json)
			if (err != nil) != tt.err {
				t.Fatalf("error %v", err)
			}
			if d := cmp.Diff(tt.want, got); d != "" || got.Enabled() != tt.on {
				t.Errorf("enabled %v (-want +got):\n%s", got.Enabled(), d)
			}
		})
	}
}

func TestConfigValidateKV(t *testing.T) {
	base := DefaultConfig()
	base.HandshakeAddress = "tcp://127.0.0.1:1"
	tests := []struct {
		name string
		mut  func(*Config)
		ok   bool
	}{
		{"off", func(*Config) {}, true},
		{"cache without events", func(c *Config) { c.KVCacheBlocks, c.PrefillPerToken = 100, time.Microsecond }, true},
		{"events without a cache", func(c *Config) { c.KVEvents = DefaultKVEventsConfig() }, false},
		{"events", func(c *Config) { c.KVCacheBlocks, c.KVEvents = 100, DefaultKVEventsConfig() }, true},
		{"ipc events on rank 1", func(c *Config) {
			c.KVCacheBlocks, c.Rank, c.DataParallelSize = 100, 1, 2
			c.KVEvents = KVEventsConfig{Enable: true, Endpoint: "ipc:///tmp/kv"}
		}, false},
		{"inproc", func(c *Config) {
			c.KVCacheBlocks, c.KVEvents = 100, KVEventsConfig{Enable: true, Endpoint: "inproc://kv"}
		}, false},
		{"negative", func(c *Config) { c.KVCacheBlocks = -1 }, false},
		{"vLLM's example ports, one rank", func(c *Config) {
			c.KVCacheBlocks = 100
			c.KVEvents = KVEventsConfig{Enable: true, Endpoint: "tcp://*:5557", ReplayEndpoint: "tcp://*:5558"}
		}, true},
		{"vLLM's example ports, two ranks collide", func(c *Config) {
			c.KVCacheBlocks, c.DataParallelSize = 100, 2
			c.KVEvents = KVEventsConfig{Enable: true, Endpoint: "tcp://*:5557", ReplayEndpoint: "tcp://*:5558"}
		}, false},
		{"ports apart by the ranks", func(c *Config) {
			c.KVCacheBlocks, c.DataParallelSize, c.Rank = 100, 4, 3
			c.KVEvents = KVEventsConfig{Enable: true, Endpoint: "tcp://*:5557", ReplayEndpoint: "tcp://*:5561"}
		}, true},
	}
	for _, tt := range tests {
		c := base
		tt.mut(&c)
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// reset_prefix_cache answers as vLLM: false while a request holds blocks, true
// when forced (reset_running_requests) or idle; and each step's scheduler_stats
// carries prefix_cache_stats.
func TestEngineResetPrefixCache(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.StepInterval, cfg.KVCacheBlocks, cfg.Layout = time.Millisecond, 64, wire.Native()
	f := startKVEngine(t, dir, cfg)
	body, _, err := f.layout.AppendAdd(nil, addPrompt("long", seqTokens(1, 40), 100000))
	if err != nil {
		t.Fatal(err)
	}
	f.in.Send(f.id, []byte{wire.RequestAdd}, body)
	stats := f.awaitPrefixStats()
	if stats.Requests != 1 || stats.Queries != 40 || stats.Hits != 0 {
		t.Errorf("prefix_cache_stats of the step that admitted it: %+v", stats)
	}
	if got := f.utility("reset_prefix_cache", nil); !bytes.Equal(got, rawFalse) {
		t.Errorf("reset with a running request: %x, want false", got)
	}
	force, _ := msgpack.Marshal([]any{true})
	if got := f.utility("reset_prefix_cache", force); !bytes.Equal(got, rawTrue) {
		t.Errorf("reset_running_requests=True: %x, want true", got)
	}
	if st := f.awaitPrefixStats(); !st.Reset {
		t.Errorf("the reset is not in the next stats: %+v", st)
	}
	f.in.Send(f.id, []byte{wire.RequestAbort}, wire.AppendAbort(nil, []string{"long"}))
	if got := f.utility("reset_prefix_cache", nil); !bytes.Equal(got, rawTrue) {
		t.Errorf("reset once idle: %x, want true", got)
	}
}

// awaitPrefixStats returns the prefix_cache_stats of the next scheduler_stats
// that has lookups or a reset.
func (f *kvFrontend) awaitPrefixStats() PrefixCacheStats {
	f.t.Helper()
	for {
		var o wire.EngineCoreOutputs
		if err := f.decode(testwait.Recv(f.t, f.outs, "scheduler_stats"), &o); err != nil {
			f.t.Fatal(err)
		}
		if o.SchedulerStats == nil {
			continue
		}
		var s struct {
			P *PrefixCacheStats `msgpack:"prefix_cache_stats"`
		}
		if err := msgpack.Unmarshal(o.SchedulerStats.Raw, &s); err != nil || s.P == nil {
			f.t.Fatalf("scheduler_stats %x without prefix_cache_stats: %v", o.SchedulerStats.Raw, err)
		}
		if s.P.Requests > 0 || s.P.Reset {
			return *s.P
		}
	}
}
