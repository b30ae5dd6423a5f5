package coordinator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-llm/switchyard/wire"
)

func newCore(t *testing.T, engines int, waves, publish bool) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Engines = engines
	cfg.EnableWaves = waves
	if publish {
		cfg.PublishAddress = "tcp://127.0.0.1:0"
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// step copies the result: the Coordinator reuses its message slice.
func step(c *Coordinator, ev Event) []Message { return append([]Message(nil), c.Step(ev)...) }
func tick(c *Coordinator, now time.Time) []Message {
	return append([]Message(nil), c.Tick(now)...)
}

func startWave(wave int64, exclude int) Message {
	m := Message{Type: MsgStartWave, Wave: wave}
	if exclude >= 0 {
		m.Exclude = wire.SomeInt(int64(exclude))
	}
	return m
}

func waveState(wave int64, running, completed bool) Message {
	return Message{Type: MsgWaveState, Wave: wave, Running: running, Completed: completed}
}

// rust-peer 5.1 item 3 and 5.4 inproc.rs: the first request of a wave wakes
// the others and excludes its target, nothing repeats while running, and
// after wave_complete the next request carries (and starts) the next wave.
func TestWaveLifecycle(t *testing.T) {
	c := newCore(t, 2, true, false)
	if w, r := c.Wave(); w != 0 || r {
		t.Fatalf("initial wave = (%d, %v), want (0, false)", w, r)
	}
	steps := []struct {
		name string
		ev   Event
		want []Message
	}{
		{"first request wakes the others", Event{Type: EventRequestArrived, Rank: 0, Wave: 0},
			[]Message{startWave(0, 0), waveState(0, true, false)}},
		{"no repeat while running", Event{Type: EventRequestArrived, Rank: 1, Wave: 0}, nil},
		{"engine start_wave for the running wave is a no-op", Event{Type: EventStartWave, Rank: 1, Wave: 0}, nil},
		{"wave_complete pauses and advances", Event{Type: EventWaveComplete, Rank: 0, Wave: 0},
			[]Message{waveState(1, false, true)}},
		{"late duplicate wave_complete ignored", Event{Type: EventWaveComplete, Rank: 0, Wave: 0}, nil},
		{"next request starts wave 1", Event{Type: EventRequestArrived, Rank: 1, Wave: 1},
			[]Message{startWave(1, 1), waveState(1, true, false)}},
	}
	for _, tt := range steps {
		got := step(c, tt.ev)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Fatalf("%s: messages (-want +got):\n%s", tt.name, diff)
		}
	}
	if w, r := c.Wave(); w != 1 || !r {
		t.Fatalf("wave = (%d, %v), want (1, true)", w, r)
	}
}

func TestStepTable(t *testing.T) {
	tests := []struct {
		name        string
		wave        int64
		running     bool
		ev          Event
		want        []Message
		wantWave    int64
		wantRunning bool
	}{
		// rust-peer 5.1 item 4: rebroadcast with the sender excluded.
		{"engine start_wave ahead is rebroadcast", 0, false,
			Event{Type: EventStartWave, Rank: 1, Wave: 4},
			[]Message{startWave(4, 1), waveState(4, true, false)}, 4, true},
		{"engine start_wave ahead while running", 2, true,
			Event{Type: EventStartWave, Rank: 0, Wave: 3},
			[]Message{startWave(3, 0), waveState(3, true, false)}, 3, true},
		{"engine start_wave for current wave while paused", 2, false,
			Event{Type: EventStartWave, Rank: 1, Wave: 2},
			[]Message{startWave(2, 1), waveState(2, true, false)}, 2, true},
		{"stale engine start_wave ignored", 5, false,
			Event{Type: EventStartWave, Rank: 1, Wave: 4}, nil, 5, false},
		// rust-peer 5.4 inproc.rs: a stale first request starts the current
		// wave on every engine.
		{"stale first request wakes all", 3, false,
			Event{Type: EventRequestArrived, Rank: 1, Wave: 2},
			[]Message{startWave(3, -1), waveState(3, true, false)}, 3, true},
		{"first request with unknown target wakes all", 0, false,
			Event{Type: EventRequestArrived, Rank: -1, Wave: 0},
			[]Message{startWave(0, -1), waveState(0, true, false)}, 0, true},
		{"first request for a newer wave keeps ours", 1, false,
			Event{Type: EventRequestArrived, Rank: 0, Wave: 2},
			[]Message{startWave(1, 0), waveState(1, true, false)}, 1, true},
		{"wave_complete ahead of us jumps", 1, true,
			Event{Type: EventWaveComplete, Rank: 0, Wave: 6},
			[]Message{waveState(7, false, true)}, 7, false},
		{"wave_complete for a past wave ignored", 4, true,
			Event{Type: EventWaveComplete, Rank: 0, Wave: 3}, nil, 4, true},
		{"stats from unknown rank dropped", 0, false,
			Event{Type: EventStats, Rank: 9, Load: wire.EngineLoad{Waiting: 1}}, nil, 0, false},
		{"stats reach the load sink", 0, false,
			Event{Type: EventStats, Rank: 1, Load: wire.EngineLoad{Waiting: 2, Running: 3, KVCacheUsage: 0.5}},
			[]Message{{Type: MsgLoad, Rank: 1, Load: wire.EngineLoad{Waiting: 2, Running: 3, KVCacheUsage: 0.5}}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, 2, true, false)
			c.wave, c.running = tt.wave, tt.running
			got := step(c, tt.ev)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if w, r := c.Wave(); w != tt.wantWave || r != tt.wantRunning {
				t.Errorf("wave = (%d, %v), want (%d, %v)", w, r, tt.wantWave, tt.wantRunning)
			}
		})
	}
}

// Without --enable-wave-coordination only load is kept: non-MoE engines
// never send wave events, and a stray one must not start broadcasts.
func TestWavesDisabled(t *testing.T) {
	c := newCore(t, 2, false, true)
	for _, ev := range []Event{
		{Type: EventRequestArrived, Rank: 0},
		{Type: EventStartWave, Rank: 1, Wave: 3},
		{Type: EventWaveComplete, Rank: 0, Wave: 0},
	} {
		if got := step(c, ev); len(got) != 0 {
			t.Errorf("%v: got %v, want nothing", ev.Type, got)
		}
	}
	got := step(c, Event{Type: EventStats, Rank: 0, Load: wire.EngineLoad{Running: 1}})
	if len(got) != 1 || got[0].Type != MsgLoad {
		t.Errorf("stats: got %v, want one MsgLoad", got)
	}
}

// rust-peer 5.1 item 5: a stats-only batch is accepted; outputs that do not
// belong on the coordinator path are flagged but their stats still count.
func TestOutputsEvents(t *testing.T) {
	stats := &wire.SchedulerStats{NumRunningReqs: 2, NumWaitingReqs: 1, KVCacheUsage: 0.25}
	tests := []struct {
		name        string
		o           wire.EngineCoreOutputs
		want        []Event
		wantIgnored bool
	}{
		{"stats only", wire.EngineCoreOutputs{EngineIndex: 1, SchedulerStats: stats},
			[]Event{{Type: EventStats, Rank: 1, Load: wire.EngineLoad{Waiting: 1, Running: 2, KVCacheUsage: 0.25}}}, false},
		{"wave complete", wire.EngineCoreOutputs{EngineIndex: 0, WaveComplete: wire.SomeInt(3)},
			[]Event{{Type: EventWaveComplete, Rank: 0, Wave: 3}}, false},
		{"start wave", wire.EngineCoreOutputs{EngineIndex: 2, StartWave: wire.SomeInt(5)},
			[]Event{{Type: EventStartWave, Rank: 2, Wave: 5}}, false},
		{"wave complete wins over start wave", wire.EngineCoreOutputs{WaveComplete: wire.SomeInt(1), StartWave: wire.SomeInt(2)},
			[]Event{{Type: EventWaveComplete, Wave: 1}}, false},
		{"empty", wire.EngineCoreOutputs{EngineIndex: 1}, nil, false},
		{"request outputs are flagged", wire.EngineCoreOutputs{EngineIndex: 1, SchedulerStats: stats,
			Outputs: []wire.EngineCoreOutput{{RequestID: "x"}}},
			[]Event{{Type: EventStats, Rank: 1, Load: wire.EngineLoad{Waiting: 1, Running: 2, KVCacheUsage: 0.25}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ignored := OutputsEvents(nil, &tt.o)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if ignored != tt.wantIgnored {
				t.Errorf("ignored = %v, want %v", ignored, tt.wantIgnored)
			}
		})
	}
}

func TestFirstReqEvent(t *testing.T) {
	got := FirstReqEvent(wire.FirstReq{Identity: wire.IdentityOf(258), HasIdentity: true, Wave: 4})
	if want := (Event{Type: EventRequestArrived, Rank: 258, Wave: 4}); got != want {
		t.Errorf("identity form: got %+v, want %+v", got, want)
	}
	got = FirstReqEvent(wire.FirstReq{EngineIndex: 3, Wave: 1})
	if want := (Event{Type: EventRequestArrived, Rank: 3, Wave: 1}); got != want {
		t.Errorf("int form: got %+v, want %+v", got, want)
	}
}

// READY goes out on the first tick and every ReadyResend after, until every
// engine has been reported ready.
func TestReadyResend(t *testing.T) {
	c := newCore(t, 2, true, false)
	t0 := time.Unix(1000, 0)
	if d, ok := c.Deadline(); !ok || !d.IsZero() {
		t.Fatalf("Deadline before first tick = (%v, %v), want (zero, true)", d, ok)
	}
	ready := []Message{{Type: MsgReady}}
	if diff := cmp.Diff(ready, tick(c, t0)); diff != "" {
		t.Fatalf("first tick (-want +got):\n%s", diff)
	}
	if got := tick(c, t0.Add(50*time.Millisecond)); len(got) != 0 {
		t.Fatalf("tick before resend: %v", got)
	}
	if d, _ := c.Deadline(); !d.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("Deadline = %v, want t0+100ms", d)
	}
	if diff := cmp.Diff(ready, tick(c, t0.Add(100*time.Millisecond))); diff != "" {
		t.Fatalf("resend (-want +got):\n%s", diff)
	}
	step(c, Event{Type: EventEngineReady, Rank: 0})
	step(c, Event{Type: EventEngineReady, Rank: 0}) // duplicate
	step(c, Event{Type: EventEngineReady, Rank: 7}) // unknown rank
	if diff := cmp.Diff(ready, tick(c, t0.Add(200*time.Millisecond))); diff != "" {
		t.Fatalf("one engine still not ready (-want +got):\n%s", diff)
	}
	step(c, Event{Type: EventEngineReady, Rank: 1})
	if !c.AllReady() {
		t.Fatal("AllReady = false after both engines")
	}
	if got := tick(c, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("READY after all ready: %v", got)
	}
	if _, ok := c.Deadline(); ok {
		t.Fatal("Deadline scheduled with nothing to do")
	}
}

// Publishes: immediately at start, then at most every PublishInterval while
// stats change, a heartbeat when they do not, and wave changes at once.
func TestPublishCadence(t *testing.T) {
	c := newCore(t, 2, true, true)
	for r := range 2 {
		step(c, Event{Type: EventEngineReady, Rank: r})
	}
	t0 := time.Unix(1000, 0)
	zero := []wire.EngineLoad{{}, {}}
	pub := func(counts []wire.EngineLoad, wave int64, running bool) []Message {
		return []Message{{Type: MsgPublish, Counts: counts, Wave: wave, Running: running}}
	}
	if diff := cmp.Diff(pub(zero, 0, false), tick(c, t0)); diff != "" {
		t.Fatalf("first publish (-want +got):\n%s", diff)
	}
	load := wire.EngineLoad{Waiting: 1, Running: 2, KVCacheUsage: 0.1}
	step(c, Event{Type: EventStats, Rank: 1, Load: load})
	if d, _ := c.Deadline(); !d.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("Deadline with changed stats = %v, want t0+100ms", d)
	}
	if got := tick(c, t0.Add(99*time.Millisecond)); len(got) != 0 {
		t.Fatalf("publish before interval: %v", got)
	}
	withLoad := []wire.EngineLoad{{}, load}
	if diff := cmp.Diff(pub(withLoad, 0, false), tick(c, t0.Add(100*time.Millisecond))); diff != "" {
		t.Fatalf("rate-limited publish (-want +got):\n%s", diff)
	}
	if got := tick(c, t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("publish without change before heartbeat: %v", got)
	}
	if d, _ := c.Deadline(); !d.Equal(t0.Add(100*time.Millisecond + 5*time.Second)) {
		t.Fatalf("heartbeat Deadline = %v", d)
	}
	if diff := cmp.Diff(pub(withLoad, 0, false), tick(c, t0.Add(6*time.Second))); diff != "" {
		t.Fatalf("heartbeat (-want +got):\n%s", diff)
	}
	got := step(c, Event{Type: EventRequestArrived, Rank: 0, Wave: 0})
	want := []Message{startWave(0, 0), waveState(0, true, false), {Type: MsgPublish, Wave: 0, Running: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("wave change publish (-want +got):\n%s", diff)
	}
}

// The published counts are a copy: a later stats event must not change a
// message already handed to the socket writer.
func TestPublishCountsAreCopies(t *testing.T) {
	c := newCore(t, 1, false, true)
	step(c, Event{Type: EventEngineReady, Rank: 0})
	msgs := tick(c, time.Unix(1, 0))
	step(c, Event{Type: EventStats, Rank: 0, Load: wire.EngineLoad{Running: 9}})
	if msgs[0].Counts[0].Running != 0 {
		t.Fatal("published counts alias the coordinator's state")
	}
}

func TestConfigValidate(t *testing.T) {
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"default", DefaultConfig(), ""},
		{"ipc", mod(func(c *Config) { c.InputAddress = "ipc:///tmp/x" }), ""},
		{"no input", mod(func(c *Config) { c.InputAddress = "" }), "InputAddress"},
		{"bad output", mod(func(c *Config) { c.OutputAddress = "udp://x" }), "OutputAddress"},
		{"bad publish", mod(func(c *Config) { c.PublishAddress = "tcp://" }), "PublishAddress"},
		{"no engines", mod(func(c *Config) { c.Engines = 0 }), "Engines"},
		{"no interval", mod(func(c *Config) { c.PublishInterval = 0 }), "PublishInterval"},
		{"short heartbeat", mod(func(c *Config) { c.HeartbeatInterval = time.Millisecond }), "HeartbeatInterval"},
		{"no resend", mod(func(c *Config) { c.ReadyResend = 0 }), "ReadyResend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			ce, ok := err.(*ConfigError)
			if !ok || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want ConfigError on %s", err, tt.field)
			}
		})
	}
}
