package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// complete posts a token prompt and returns the rank that answered.
func complete(t *testing.T, base string, prompt []int, pin int) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 2})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(string(b)))
	if pin >= 0 {
		req.Header.Set(httpapi.RankHeader, fmt.Sprint(pin))
	}
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %d", resp.StatusCode)
	}
	return resp.Header.Get(httpapi.RankHeader)
}

// prompt is n tokens starting at from.
func prompt(from, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = from + i
	}
	return p
}

// engineViews reads /v1/engines.
func kvEngineViews(t *testing.T, base string) []httpapi.EngineView {
	t.Helper()
	resp, err := testwait.HTTPClient.Get(base + "/v1/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Engines []httpapi.EngineView `json:"engines"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Engines
}

// waitBlocks waits until every rank's index holds at least one block.
func waitBlocks(t *testing.T, base string, ranks int) {
	t.Helper()
	deadline := time.Now().Add(testwait.Deadline)
	for {
		ok := 0
		views := kvEngineViews(t, base)
		for _, v := range views {
			if v.KVEvents != nil && v.KVEvents.Blocks > 0 {
				ok++
			}
		}
		if ok == ranks {
			return
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(views)
			t.Fatalf("waited %v for every rank's KV events: %s", testwait.Deadline, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A fleet of every vLLM release's layout, each publishing KV events in its own
// encoding: a request goes to the engine that holds its prefix.
func TestServeKVPolicyFollowsEveryRelease(t *testing.T) {
	names := []string{"v0.11", "v0.12", "v0.15", "v0.18", "v0.21", "newest"}
	s := startServer(t, func(c *Config) {
		c.LBPolicy = "kv"
		c.MockEngines = len(names)
		for _, n := range names {
			c.MockLayouts = append(c.MockLayouts, wire.BuiltinLayout(n))
		}
	})
	base := "http://" + s.HTTPAddr()
	// Each rank computes a prefix of its own (pinned: never overridden).
	for r := range names {
		if got := complete(t, base, prompt(1000*(r+1), 64), r); got != fmt.Sprint(r) {
			t.Fatalf("pinned to %d, answered by %s", r, got)
		}
	}
	waitBlocks(t, base, len(names))
	for _, v := range kvEngineViews(t, base) {
		if st := v.KVEvents; st == nil || !st.Connected || st.LastSeq < 0 || st.Blocks != 4 {
			t.Fatalf("rank %d (%s): kv_events %+v, want connected with the prompt's 4 blocks", v.Rank, v.Layout, st)
		}
	}
	// The same prefix with a new suffix goes where it is cached.
	for r := range names {
		p := append(prompt(1000*(r+1), 64), prompt(7, 40)...)
		if got := complete(t, base, p, -1); got != fmt.Sprint(r) {
			t.Errorf("prefix cached on %d (%s) went to %s", r, names[r], got)
		}
	}
}

// Without events, the prefix policy remembers what it routed. The history is long
// enough that its cache outweighs one request of load noise (stats that still count
// a finished request), as a conversation's history does.
func TestServePrefixPolicyKeepsAConversationTogether(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.LBPolicy = "prefix"
		c.MockEngines = 3
	})
	base := "http://" + s.HTTPAddr()
	for conv := range 3 {
		history := prompt(1000*(conv+1), 512)
		first := complete(t, base, history, -1)
		for turn := range 4 {
			history = append(history, prompt(50000+turn*100, 64)...)
			if got := complete(t, base, history, -1); got != first {
				t.Fatalf("conversation %d turn %d went to %s, its history is on %s", conv, turn, got, first)
			}
		}
	}
	for _, v := range kvEngineViews(t, base) {
		if v.KVEvents != nil {
			t.Fatalf("prefix mode follows no events, rank %d shows %+v", v.Rank, v.KVEvents)
		}
	}
}

func TestKVConfigValidation(t *testing.T) {
	for _, tt := range []struct {
		mutate func(*Config)
		err    string
	}{
		{func(c *Config) { c.LBPolicy = "cache" }, "lb-policy"},
		{func(c *Config) { c.KV.EventsEndpoints = []string{"tcp://*:5557"} }, "only with --lb-policy kv"},
		{func(c *Config) { c.LBPolicy = "kv"; c.KV.EventsEndpoints = []string{"udp://x:1"} }, "want tcp"},
		{func(c *Config) { c.LBPolicy = "kv"; c.KV.EventsEndpoints = []string{"tcp://a:1", "tcp://b:1"} }, "one plain endpoint"},
		{func(c *Config) { c.LBPolicy = "kv"; c.KV.EventsEndpoints = []string{"x=tcp://a:1"} }, "RANK=ENDPOINT"},
		{func(c *Config) { c.LBPolicy = "kv"; c.KV.BalanceThreshold = -1 }, "kv-balance-threshold"},
		{func(c *Config) { c.LBPolicy = "kv"; c.KV.EventsEndpoints = []string{"tcp://*:5557", "1=ipc:///tmp/k"} }, ""},
	} {
		c := DefaultConfig()
		tt.mutate(&c)
		err := c.Validate()
		if tt.err == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.KV, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%+v: %v, want %q", c.KV, err, tt.err)
		}
	}
}

// With P/D the prefill engine is chosen by cache: a conversation's prefills stay on
// one prefill engine; decode engines are chosen by load.
func TestServePrefixPolicyPicksThePrefillEngine(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.LBPolicy = "prefix"
		c.MockEngines = 2
		c.PD.MockPrefillEngines = 2
	})
	base := "http://" + s.HTTPAddr()
	history := prompt(1000, 512)
	for turn := range 5 {
		history = append(history, prompt(50000+turn*100, 64)...)
		complete(t, base, history, -1)
	}
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	perRank := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "prefill_switchyard_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rank" {
					perRank[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if perRank["0"]+perRank["1"] != 5 || (perRank["0"] != 5 && perRank["1"] != 5) {
		t.Fatalf("prefill legs per rank %v: want all 5 turns on one prefill engine", perRank)
	}
}
