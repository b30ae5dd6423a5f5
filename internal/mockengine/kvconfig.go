package mockengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// KVEventsConfig is vLLM's KVEventsConfig (vllm/config/kv_events.py), the
// --kv-events-config of `vllm serve`: where the engine publishes its KV cache
// events. The engine publishes when Enabled; the registration of layouts that
// carry kv_events_config repeats the fields exactly as given (wildcard host,
// port not offset by the rank), as vLLM's EngineCoreReadyResponse does.
type KVEventsConfig struct {
	Enable    bool   // enable_kv_cache_events
	Publisher string // "zmq", or "null" (publish nothing); "" = "zmq" when Enable, as vLLM's __post_init__
	// Endpoint is the PUB socket's endpoint, offset by the engine's rank
	// (OffsetEndpoint). It binds when it has "*" or "::" or is ipc://, and
	// connects otherwise, as vLLM's ZmqEventPublisher decides.
	Endpoint string
	// ReplayEndpoint, when set, is the replay ROUTER's endpoint (always bound,
	// offset like Endpoint).
	ReplayEndpoint string
	BufferSteps    int    // messages kept for replay; 0 = 10000, vLLM's default
	HWM            int    // messages queued per subscriber before dropping; 0 = 100000
	MaxQueueSize   int    // reported only (the mock publishes in its step); 0 = 100000
	Topic          string // the first frame of every message
}

// vLLM's KVEventsConfig defaults.
const (
	defaultKVEndpoint    = "tcp://*:5557"
	defaultKVBufferSteps = 10_000
	defaultKVHWM         = 100_000
	defaultKVQueue       = 100_000
)

// DefaultKVEventsConfig is vLLM's defaults with events enabled: the zmq publisher
// on tcp://*:5557 (tcp://*:5557+R for rank R), no replay endpoint.
func DefaultKVEventsConfig() KVEventsConfig {
	return KVEventsConfig{Enable: true, Publisher: "zmq", Endpoint: defaultKVEndpoint,
		BufferSteps: defaultKVBufferSteps, HWM: defaultKVHWM, MaxQueueSize: defaultKVQueue}
}

// Enabled reports whether the engine publishes: enabled, the zmq publisher, an
// endpoint.
func (k KVEventsConfig) Enabled() bool {
	return k.Enable && (k.Publisher == "" || k.Publisher == "zmq") && k.Endpoint != ""
}

// withDefaults fills vLLM's defaults into unset sizes and the publisher.
func (k KVEventsConfig) withDefaults() KVEventsConfig {
	if k.Publisher == "" {
		k.Publisher = "null"
		if k.Enable {
			k.Publisher = "zmq"
		}
	}
	if k.BufferSteps <= 0 {
		k.BufferSteps = defaultKVBufferSteps
	}
	if k.HWM <= 0 {
		k.HWM = defaultKVHWM
	}
	if k.MaxQueueSize <= 0 {
		k.MaxQueueSize = defaultKVQueue
	}
	return k
}

// kvEventsJSON is vLLM's JSON form; pointers tell a given field from a default.
type kvEventsJSON struct {
	Enable         *bool   `json:"enable_kv_cache_events"`
	Publisher      *string `json:"publisher"`
	Endpoint       *string `json:"endpoint"`
	ReplayEndpoint *string `json:"replay_endpoint"`
	BufferSteps    *int    `json:"buffer_steps"`
	HWM            *int    `json:"hwm"`
	MaxQueueSize   *int    `json:"max_queue_size"`
	Topic          *string `json:"topic"`
}

// ParseKVEventsConfig reads vLLM's JSON form, as `vllm serve --kv-events-config`
// takes it: absent fields take vLLM's defaults (endpoint tcp://*:5557), unknown
// fields are an error, as pydantic refuses them.
func ParseKVEventsConfig(s string) (KVEventsConfig, error) {
	var j kvEventsJSON
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return KVEventsConfig{}, fmt.Errorf("mockengine: kv events config: %w", err)
	}
	k := KVEventsConfig{Endpoint: defaultKVEndpoint}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if j.Enable != nil {
		k.Enable = *j.Enable
	}
	set(&k.Publisher, j.Publisher)
	set(&k.Endpoint, j.Endpoint)
	set(&k.ReplayEndpoint, j.ReplayEndpoint)
	set(&k.Topic, j.Topic)
	for _, f := range []struct {
		dst *int
		v   *int
	}{{&k.BufferSteps, j.BufferSteps}, {&k.HWM, j.HWM}, {&k.MaxQueueSize, j.MaxQueueSize}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if k.Publisher != "" && k.Publisher != "zmq" && k.Publisher != "null" {
		return KVEventsConfig{}, fmt.Errorf("mockengine: kv events config: publisher %q (want \"zmq\" or \"null\")", k.Publisher)
	}
	return k.withDefaults(), nil
}

// errKVInproc: switchyard's transport speaks tcp:// and ipc:// only.
var errKVInproc = errors.New("mockengine: kv events: inproc:// endpoints need an in-process ZeroMQ context; use tcp:// or ipc://")

// OffsetEndpoint is endpoint as the engine of data-parallel rank R uses it,
// vLLM's ZmqEventPublisher.offset_endpoint_port: unchanged for rank 0; for
// R > 0 the port after the last colon plus R for tcp, "_dp<R>" appended for
// inproc, and any other scheme (ipc) an error.
func OffsetEndpoint(endpoint string, rank int) (string, error) {
	if endpoint == "" || rank == 0 {
		return endpoint, nil
	}
	switch {
	case strings.Contains(endpoint, "inproc"):
		return endpoint + "_dp" + strconv.Itoa(rank), nil
	case strings.Contains(endpoint, "tcp"):
		i := strings.LastIndexByte(endpoint, ':')
		if i < 0 {
			return endpoint, nil
		}
		port, err := strconv.Atoi(endpoint[i+1:])
		if err != nil {
			return "", fmt.Errorf("mockengine: kv events endpoint %q: port: %w", endpoint, err)
		}
		return endpoint[:i+1] + strconv.Itoa(port+rank), nil
	}
	return "", fmt.Errorf("mockengine: kv events endpoint %q: rank %d needs tcp:// or inproc:// (vLLM offsets only those)", endpoint, rank)
}

// kvBinds is vLLM's choice between bind and connect for the PUB socket.
func kvBinds(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// validate checks k for the engine of rank among size ranks.
func (k KVEventsConfig) validate(rank, size int) error {
	for _, ep := range []string{k.Endpoint, k.ReplayEndpoint} {
		if strings.HasPrefix(ep, "inproc://") {
			return errKVInproc
		}
		if _, err := OffsetEndpoint(ep, rank); err != nil {
			return err
		}
	}
	// vLLM offsets both ports by the rank, so ports closer than the number of
	// ranks collide (5557 and 5558 with two ranks: rank 1's PUB is rank 0's
	// replay ROUTER). vLLM finds out when the second bind fails; say it now.
	p, okP := tcpPort(k.Endpoint)
	r, okR := tcpPort(k.ReplayEndpoint)
	if okP && okR && max(p-r, r-p) < size {
		return fmt.Errorf("mockengine: kv events endpoint %s and replay endpoint %s: with %d ranks, each offset by its rank, their ports collide",
			k.Endpoint, k.ReplayEndpoint, size)
	}
	return nil
}

// tcpPort is a tcp endpoint's port.
func tcpPort(ep string) (int, bool) {
	i := strings.LastIndexByte(ep, ':')
	if !strings.HasPrefix(ep, "tcp://") || i < 0 {
		return 0, false
	}
	p, err := strconv.Atoi(ep[i+1:])
	return p, err == nil
}

// kvEventsMsgpack is KVEventsConfig as msgspec writes the dataclass: a map of
// every field in declaration order.
type kvEventsMsgpack struct {
	Enable         bool    `msgpack:"enable_kv_cache_events"`
	Publisher      string  `msgpack:"publisher"`
	Endpoint       string  `msgpack:"endpoint"`
	ReplayEndpoint *string `msgpack:"replay_endpoint"`
	BufferSteps    int     `msgpack:"buffer_steps"`
	HWM            int     `msgpack:"hwm"`
	MaxQueueSize   int     `msgpack:"max_queue_size"`
	Topic          string  `msgpack:"topic"`
}

// registration is kv_events_config as the engine registers it: the fields as
// configured, with vLLM's defaults for sizes left at 0.
func (k KVEventsConfig) registration() (wire.Raw, error) {
	k = k.withDefaults()
	m := kvEventsMsgpack{Enable: k.Enable, Publisher: k.Publisher, Endpoint: k.Endpoint,
		BufferSteps: k.BufferSteps, HWM: k.HWM, MaxQueueSize: k.MaxQueueSize, Topic: k.Topic}
	if k.ReplayEndpoint != "" {
		m.ReplayEndpoint = &k.ReplayEndpoint
	}
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.UseCompactInts(true)
	if err := enc.Encode(&m); err != nil {
		return nil, fmt.Errorf("mockengine: kv_events_config: %w", err)
	}
	return wire.Raw(b.Bytes()), nil
}
