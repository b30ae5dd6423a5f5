package lora

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// Activity follows which adapters each engine runs or queues (its scheduler
// stats' running_lora_adapters and waiting_lora_adapters) and which it was
// recently sent, for the router and for vllm:lora_requests_info. Safe for
// concurrent use; no IO.
type Activity struct {
	mu     sync.Mutex
	ranks  map[int]*rankActivity
	recent time.Duration
	now    func() time.Time

	gauge    *prometheus.GaugeVec // nil: no metrics
	maxLoRA  string
	labels   [2]string // the exported series' waiting and running labels
	exported bool
}

type rankActivity struct {
	running, waiting []string
	sent             map[string]time.Time // adapter -> when a request for it was last sent here
}

// MaxNamesPerRank bounds what one engine's stats may add: names beyond it are
// ignored (an engine holds max_loras adapters at once; this is far more).
const MaxNamesPerRank = 256

// ActivityConfig configures NewActivity.
type ActivityConfig struct {
	// Recent is how long an engine counts as holding an adapter after a request
	// for it was sent there; 0 = 30s.
	Recent time.Duration
	// Registerer, when set, gets vllm:lora_requests_info; MaxLoRAs is its
	// max_lora label.
	Registerer prometheus.Registerer
	MaxLoRAs   int
	Now        func() time.Time
}

// NewActivity builds the tracker and registers its gauge.
func NewActivity(cfg ActivityConfig) (*Activity, error) {
	a := &Activity{ranks: map[int]*rankActivity{}, recent: cfg.Recent, now: cfg.Now, maxLoRA: strconv.Itoa(cfg.MaxLoRAs)}
	if a.recent <= 0 {
		a.recent = 30 * time.Second
	}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.Registerer != nil {
		a.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:lora_requests_info",
			Help: "Running stats on lora requests."}, []string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"})
		if err := cfg.Registerer.Register(a.gauge); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *Activity) rank(r int) *rankActivity {
	ra := a.ranks[r]
	if ra == nil {
		ra = &rankActivity{sent: map[string]time.Time{}}
		a.ranks[r] = ra
	}
	return ra
}

// Observe takes one scheduler-stats report of rank. Stats without the LoRA
// fields (older releases, or a value of another shape) leave them unknown.
func (a *Activity) Observe(rank int, st *wire.SchedulerStats) {
	if a == nil || st == nil {
		return
	}
	running, waiting, ok := decodeAdapters(st.Raw)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ra := a.rank(rank)
	ra.running, ra.waiting = running, waiting
	a.exportLocked()
}

// Sent notes that a request for adapter name went to rank.
func (a *Activity) Sent(rank int, name string) {
	if a == nil || name == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ra := a.rank(rank)
	if _, ok := ra.sent[name]; !ok && len(ra.sent) >= MaxNamesPerRank {
		a.pruneLocked(ra)
		if len(ra.sent) >= MaxNamesPerRank {
			return
		}
	}
	ra.sent[name] = a.now()
}

func (a *Activity) pruneLocked(ra *rankActivity) {
	cut := a.now().Add(-a.recent)
	for n, t := range ra.sent {
		if t.Before(cut) {
			delete(ra.sent, n)
		}
	}
}

// EngineDown forgets rank: a restarted engine holds no adapter.
func (a *Activity) EngineDown(rank int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.ranks, rank)
	a.exportLocked()
}

// Holds reports whether rank runs, queues or was recently sent adapter name.
func (a *Activity) Holds(rank int, name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ra := a.ranks[rank]
	if ra == nil {
		return false
	}
	if slices.Contains(ra.running, name) || slices.Contains(ra.waiting, name) {
		return true
	}
	t, ok := ra.sent[name]
	return ok && a.now().Sub(t) < a.recent
}

// exportLocked sets the one vllm:lora_requests_info series to now: the union
// over engines of the adapters running and waiting, sorted and comma-joined
// (vLLM joins one engine's; with several engines a union is the fleet's view).
// A series with other labels is removed, so only the current one is exported.
func (a *Activity) exportLocked() {
	if a.gauge == nil {
		return
	}
	var running, waiting []string
	for _, ra := range a.ranks {
		running = append(running, ra.running...)
		waiting = append(waiting, ra.waiting...)
	}
	labels := [2]string{joinSorted(waiting), joinSorted(running)}
	if a.exported && labels != a.labels {
		a.gauge.DeleteLabelValues(a.maxLoRA, a.labels[0], a.labels[1])
	}
	a.labels, a.exported = labels, true
	a.gauge.WithLabelValues(a.maxLoRA, labels[0], labels[1]).Set(float64(a.now().UnixNano()) / 1e9)
}

func joinSorted(names []string) string {
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

// decodeAdapters reads running_lora_adapters and waiting_lora_adapters (each
// {name: count}) from a SchedulerStats map; ok is false when neither is there.
// Leniently: a value of another shape counts as absent, not as an error.
func decodeAdapters(raw wire.Raw) (running, waiting []string, ok bool) {
	if len(raw) == 0 {
		return nil, nil, false
	}
	d := msgpack.NewDecoder(bytes.NewReader(raw))
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, nil, false
	}
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			return nil, nil, false
		}
		switch k {
		case "running_lora_adapters":
			running, err = decodeNames(d)
			ok = ok || err == nil
		case "waiting_lora_adapters":
			waiting, err = decodeNames(d)
			ok = ok || err == nil
		default:
			err = d.Skip()
		}
		if err != nil {
			return running, waiting, ok
		}
	}
	return running, waiting, ok
}

// decodeNames reads a {str: int} map's keys (at most MaxNamesPerRank).
func decodeNames(d *msgpack.Decoder) ([]string, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	names := make([]string, 0, min(n, MaxNamesPerRank))
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			return nil, err
		}
		if err := d.Skip(); err != nil {
			return nil, err
		}
		if len(names) < MaxNamesPerRank && len(k) <= MaxNameLen {
			names = append(names, k)
		}
	}
	return names, nil
}
