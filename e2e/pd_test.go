package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// pdDeployment is serve with decode and prefill mock-engine processes over tcp.
type pdDeployment struct {
	s                *server
	decode, prefill  []*proc
	hsDecode, hsPref string
}

// startPD runs serve with nd decode and np prefill mock engines, each in its own
// process with its role; prefillArgs go to the prefill engines.
func startPD(t *testing.T, nd, np int, serveArgs []string, prefillArgs ...string) *pdDeployment {
	return startPDWith(t, nd, np, serveArgs, []string{"--step-ms", "2"}, prefillArgs...)
}

// startPDWith is startPD with the decode engines' arguments.
func startPDWith(t *testing.T, nd, np int, serveArgs, decodeArgs []string, prefillArgs ...string) *pdDeployment {
	t.Helper()
	d := &pdDeployment{hsDecode: "tcp://" + freeLoopbackAddr(t), hsPref: "tcp://" + freeLoopbackAddr(t)}
	args := append([]string{"--handshake-address", d.hsDecode, "--data-parallel-size", strconv.Itoa(nd),
		"--prefill-handshake-address", d.hsPref, "--prefill-data-parallel-size", strconv.Itoa(np),
		"--engine-transport", "tcp"}, serveArgs...)
	d.s = startServe(t, args...)
	for r := range nd {
		a := append([]string{"mock-engine", "--handshake-address", d.hsDecode, "--data-parallel-rank", strconv.Itoa(r),
			"--data-parallel-size", strconv.Itoa(nd), "--pd-role", "decode"}, decodeArgs...)
		d.decode = append(d.decode, start(t, "decode mock-engine "+strconv.Itoa(r), a...))
	}
	for r := range np {
		a := append([]string{"mock-engine", "--handshake-address", d.hsPref, "--data-parallel-rank", strconv.Itoa(r),
			"--data-parallel-size", strconv.Itoa(np), "--pd-role", "prefill"}, prefillArgs...)
		if !slices.Contains(prefillArgs, "--step-ms") {
			a = append(a, "--step-ms", "2")
		}
		d.prefill = append(d.prefill, start(t, "prefill mock-engine "+strconv.Itoa(r), a...))
	}
	eventually(t, 20*time.Second, "every engine ready with its role", func() bool {
		roles := map[string]int{}
		for _, e := range d.roles(t) {
			if e.Ready {
				roles[e.Role]++
			}
		}
		return roles["decode"] == nd && roles["prefill"] == np
	})
	return d
}

type roleEngine struct {
	Rank     int    `json:"rank"`
	Ready    bool   `json:"ready"`
	Role     string `json:"role"`
	InFlight int64  `json:"in_flight"`
}

func (d *pdDeployment) roles(t *testing.T) []roleEngine {
	t.Helper()
	_, b := d.s.get(t, "/v1/engines")
	var v struct {
		Engines []roleEngine `json:"engines"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("/v1/engines: %s: %v", b, err)
	}
	return v.Engines
}

func pdPrompt(i, n int) []int64 {
	p := make([]int64, n)
	for j := range p {
		p[j] = int64(100 + i*7 + j)
	}
	return p
}

// complete sends one completion and checks its tokens are the uninterrupted
// sequence of the mock engines (a decode mock that refused the handle would have
// finished with an error and no token).
func (d *pdDeployment) complete(t *testing.T, prompt []int64, maxTokens int, stream bool) error {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens, "stream": stream})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, b, err := d.s.post(ctx, string(body))
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var toks []int64
	var finish string
	if stream {
		r := foldStream(t, b)
		toks, finish = r.tokens[0], r.finish[0]
	} else {
		var v struct {
			Choices []struct {
				TokenIDs     []int64 `json:"token_ids"`
				FinishReason string  `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.Choices) != 1 {
			return fmt.Errorf("body %s: %v", b, err)
		}
		toks, finish = v.Choices[0].TokenIDs, v.Choices[0].FinishReason
	}
	if want := mockengine.TokensFor(prompt, maxTokens); !slices.Equal(toks, want) || finish != "length" {
		return fmt.Errorf("tokens %v finish %q, want %v length", toks, finish, want)
	}
	return nil
}

// Every long prompt is prefilled on a prefill engine and decoded on a decode engine
// with the prefill's handle (the decode mocks refuse a wrong one); short prompts are
// prefilled by their decode engine; /v1/engines and the metrics say so.
func TestPDMockEnginesOverSockets(t *testing.T) {
	d := startPD(t, 2, 2, []string{"--pd-min-prompt-tokens", "8"})
	const long, short = 40, 6
	var wg sync.WaitGroup
	errs := make(chan error, long+short)
	for i := range long + short {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 24
			if i >= long {
				n = 4
			}
			if err := d.complete(t, pdPrompt(i, n), 6, i%2 == 0); err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
			}
		}()
	}
	testwait.Wait(t, &wg, "the completions")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := scrape(t, d.s.url("/metrics"))
	if v := metricSum(m, "switchyard_pd_pairs_total", ""); v != long {
		t.Errorf("switchyard_pd_pairs_total = %v, want %d", v, long)
	}
	if v := metricSum(m, "switchyard_pd_local_prefills_total", `reason="short_prompt"`); v != short {
		t.Errorf("local prefills (short_prompt) = %v, want %d", v, short)
	}
	if v := metricSum(m, "prefill_switchyard_requests_total", `outcome="length"`); v != long {
		t.Errorf("prefill legs finished = %v, want %d", v, long)
	}
	if v := metricSum(m, "switchyard_requests_total", `outcome="error"`); v != 0 {
		t.Errorf("%v requests finished with an error (a decode engine refused a handle)", v)
	}
	if v := metricSum(m, "switchyard_pd_leg_seconds_count", `leg="handoff"`); v != long {
		t.Errorf("handoff observations %v, want %d", v, long)
	}
	for _, l := range m {
		if strings.HasPrefix(l, "switchyard_pd_leg_seconds_sum") {
			t.Log(l)
		}
	}
}

// A prefill engine killed under load: its legs are resent to the other prefill
// engine (or prefilled by the decode engine); with no prefill engine left every
// request is prefilled locally. No request fails, none loses a token.
func TestPDPrefillEngineKilled(t *testing.T) {
	d := startPD(t, 1, 2, nil, "--step-ms", "40")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.complete(t, pdPrompt(i, 16), 4, i%2 == 1); err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
			}
		}()
	}
	eventually(t, 10*time.Second, "prefill legs in flight on prefill rank 0", func() bool {
		for _, e := range d.roles(t) {
			if e.Role == "prefill" && e.Rank == 0 {
				return e.InFlight > 0
			}
		}
		return false
	})
	_ = d.prefill[0].cmd.Process.Signal(syscall.SIGKILL)
	testwait.Wait(t, &wg, "the completions across the killed prefill engine")
	eventually(t, 10*time.Second, "prefill rank 0 down", func() bool {
		for _, e := range d.roles(t) {
			if e.Role == "prefill" && e.Rank == 0 {
				return !e.Ready
			}
		}
		return false
	})
	_ = d.prefill[1].cmd.Process.Signal(syscall.SIGKILL)
	eventually(t, 10*time.Second, "no prefill engine ready", func() bool {
		for _, e := range d.roles(t) {
			if e.Role == "prefill" && e.Ready {
				return false
			}
		}
		return true
	})
	for i := range 4 {
		if err := d.complete(t, pdPrompt(100+i, 16), 4, false); err != nil {
			t.Errorf("without prefill engines: %v", err)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := scrape(t, d.s.url("/metrics"))
	moved := metricSum(m, "switchyard_pd_prefill_retries_total", "") + metricSum(m, "switchyard_pd_local_prefills_total", `reason="prefill_failed"`)
	if moved < 1 {
		t.Errorf("no prefill leg was retried or fell back after the kill")
	}
	if v := metricSum(m, "switchyard_pd_local_prefills_total", `reason="no_prefill_engine"`); v != 4 {
		t.Errorf("local prefills (no_prefill_engine) = %v, want 4", v)
	}
	t.Logf("pairs %v, retries %v, local after failure %v", metricSum(m, "switchyard_pd_pairs_total", ""),
		metricSum(m, "switchyard_pd_prefill_retries_total", ""), metricSum(m, "switchyard_pd_local_prefills_total", `reason="prefill_failed"`))
}

// A client that disconnects while its request is being prefilled has the prefill
// leg aborted at the prefill engine; no decode engine ever sees the request.
func TestPDClientAbortDuringPrefill(t *testing.T) {
	d := startPD(t, 1, 1, nil, "--step-ms", "1500", "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	body, _ := json.Marshal(map[string]any{"prompt": pdPrompt(1, 32), "max_tokens": 8, "stream": true})
	_, _, err := d.s.post(ctx, string(body))
	cancel()
	if err == nil {
		t.Fatal("the request finished before the client went away")
	}
	eventually(t, 10*time.Second, "the prefill engine got the ABORT", func() bool {
		p := d.prefill[0]
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			if l["msg"] == "mockengine: request" && l["type"] == 1.0 {
				return true
			}
		}
		return false
	})
	m := scrape(t, d.s.url("/metrics"))
	if v := metricSum(m, "switchyard_requests_total", `outcome="cancelled",rank="prefill_stage"`); v != 1 {
		t.Errorf("requests cancelled in their prefill part = %v, want 1", v)
	}
	if v := metricSum(m, "prefill_switchyard_requests_total", `outcome="cancelled"`); v != 1 {
		t.Errorf("prefill legs cancelled = %v, want 1", v)
	}
	if v := metricSum(m, "switchyard_requests_total", `rank="0"`); v != 0 {
		t.Errorf("the decode engine saw %v requests", v)
	}
	if v := metricSum(m, "switchyard_pd_in_flight", ""); v != 0 {
		t.Errorf("in flight after the abort: %v", v)
	}
}

// libzmq (pyzmq) engines with vLLM's connector semantics: the prefill engine finds
// do_remote_decode in sampling_params.extra_args.kv_transfer_params and returns
// kv_transfer_params in its final output; the decode engine gets exactly those (a
// wrong handle would be refused) under the transfer_id switchyard gave the leg.
func TestPDPythonEngines(t *testing.T) {
	py := pytest.Find(t, "zmq", "msgpack")
	hsD, hsP := "tcp://"+freeLoopbackAddr(t), "tcp://"+freeLoopbackAddr(t)
	s := startServe(t, "--handshake-address", hsD, "--prefill-handshake-address", hsP, "--engine-transport", "tcp",
		"--pd-min-prompt-tokens", "8")
	dir := t.TempDir()
	statsOf := func(role string) string { return filepath.Join(dir, role+".json") }
	for _, role := range []string{"prefill", "decode"} {
		hs := hsD
		if role == "prefill" {
			hs = hsP
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, py, "testdata/py_pd_engine.py", hs, role, statsOf(role))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			testwait.Func(t, "py_pd_engine.py "+role+" to exit after the kill", func() { _ = cmd.Wait() })
		})
	}
	d := &pdDeployment{s: s}
	eventually(t, 20*time.Second, "both Python engines ready", func() bool {
		n := 0
		for _, e := range d.roles(t) {
			if e.Ready {
				n++
			}
		}
		return n == 2
	})
	const long, short = 12, 3
	for i := range long + short {
		n := 40
		if i >= long {
			n = 5
		}
		body, _ := json.Marshal(map[string]any{"prompt": pdPrompt(i, n), "max_tokens": 3, "stream": i%2 == 0})
		resp, b, err := s.post(context.Background(), string(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %v %s", i, err, b)
		}
		if !strings.Contains(string(b), "1000") || !strings.Contains(string(b), "1002") {
			t.Fatalf("request %d: tokens missing: %s", i, b)
		}
	}
	type pyStats struct {
		Prefills, Remote, Local, Refused, BadLegs int
		IDs                                       []string `json:"ids"`
		TransferIDs                               []string `json:"transfer_ids"`
	}
	read := func(role string) pyStats {
		b, err := os.ReadFile(statsOf(role))
		if err != nil {
			t.Fatal(err)
		}
		var st pyStats
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	pre, dec := read("prefill"), read("decode")
	if pre.Prefills != long || pre.BadLegs != 0 {
		t.Errorf("prefill engine: %d prefills, %d legs without do_remote_decode/max_tokens 1; want %d, 0", pre.Prefills, pre.BadLegs, long)
	}
	if dec.Remote != long || dec.Local != short || dec.Refused != 0 {
		t.Errorf("decode engine: remote %d local %d refused %d; want %d %d 0", dec.Remote, dec.Local, dec.Refused, long, short)
	}
	// Every decode leg got the transfer_id of a prefill leg, which is that leg's
	// engine request id (REQ#pN): no suffix anywhere.
	if !slices.Equal(pre.TransferIDs, pre.IDs) || !slices.Equal(dec.TransferIDs, pre.TransferIDs) {
		t.Errorf("transfer ids: prefill legs %v (ids %v), decode %v", pre.TransferIDs, pre.IDs, dec.TransferIDs)
	}
	// Each prefill leg is named after its decode leg's id, the request's own.
	for _, id := range pre.IDs {
		i := strings.LastIndex(id, "#p")
		if i < 0 || !slices.Contains(dec.IDs, id[:i]) {
			t.Errorf("prefill leg %q has no decode leg (decode ids %v)", id, dec.IDs)
		}
	}
}

// The embedded default with prefill engines: one curl takes P then D, /v1/engines
// names each engine's role, and the pair is counted.
func TestPDEmbeddedDefault(t *testing.T) {
	s := startServe(t, "--mock-engines", "2", "--mock-prefill-engines", "1", "--bootstrap-address", freeLoopbackAddr(t),
		"--allow-utility-method", "pd_stats")
	d := &pdDeployment{s: s}
	roles := map[string]int{}
	for _, e := range d.roles(t) {
		roles[e.Role]++
	}
	if roles["decode"] != 2 || roles["prefill"] != 1 {
		t.Fatalf("roles %v, want 2 decode and 1 prefill", roles)
	}
	if err := d.complete(t, []int64{1, 2, 3}, 4, false); err != nil {
		t.Fatal(err)
	}
	// The msgpack client protocol splits requests the same way; the callbacks see
	// the decode leg under the client's own id.
	c := dialMPClient(t, s.client)
	for i, id := range []string{"mp-0", "mp-1", "mp-2"} {
		c.add(t, id, 5, i%2)
	}
	for id, r := range c.collect(t, 3) {
		if r.tokens != 5 || r.finish != wire.FinishLength {
			t.Errorf("%s: %d tokens, finish %v", id, r.tokens, r.finish)
		}
	}
	if v := metricSum(scrape(t, s.url("/metrics")), "switchyard_pd_pairs_total", ""); v != 4 {
		t.Errorf("switchyard_pd_pairs_total = %v, want 4", v)
	}
	// The decode mocks counted the remote prefills (handle matched), none refused.
	u := c.utility(t, 9, "pd_stats")
	if u.Failure.Valid || !bytes.Contains(u.Result, []byte("remote_prefills")) {
		t.Errorf("pd_stats: %+v", u)
	}
	// serve printed each role's --kv-transfer-config with the registry address.
	for _, role := range []string{"kv_producer", "kv_consumer"} {
		if !strings.Contains(s.log(), `\"kv_role\":\"`+role+`\"`) || !strings.Contains(s.log(), "bootstrap_server_address") {
			t.Errorf("no --kv-transfer-config for %s in the log", role)
		}
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// Bootstrapped prefill engines (a launcher did their handshake) beside
// handshaking decode engines.
func TestPDBootstrappedPrefill(t *testing.T) {
	dir := t.TempDir()
	in, out := "ipc://"+dir+"/pin", "ipc://"+dir+"/pout"
	hsD := "tcp://" + freeLoopbackAddr(t)
	s := startServe(t, "--handshake-address", hsD, "--prefill-input-address", in, "--prefill-output-address", out,
		"--prefill-data-parallel-size", "2")
	start(t, "decode mock-engine", "mock-engine", "--handshake-address", hsD, "--step-ms", "2", "--pd-role", "decode")
	for rank := range 2 {
		start(t, "prefill mock-engine "+strconv.Itoa(rank), "mock-engine", "--input-address", in, "--output-address", out,
			"--data-parallel-rank", strconv.Itoa(rank), "--data-parallel-size", "2", "--step-ms", "2", "--pd-role", "prefill")
	}
	d := &pdDeployment{s: s}
	eventually(t, 20*time.Second, "three engines ready", func() bool {
		n := 0
		for _, e := range d.roles(t) {
			if e.Ready {
				n++
			}
		}
		return n == 3
	})
	for i := range 6 {
		if err := d.complete(t, pdPrompt(i, 20), 3, i%2 == 0); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	m := scrape(t, s.url("/metrics"))
	if v := metricSum(m, "switchyard_pd_pairs_total", ""); v != 6 {
		t.Errorf("pairs %v, want 6", v)
	}
	for _, rank := range []string{`rank="0"`, `rank="1"`} {
		if v := metricSum(m, "prefill_switchyard_requests_total", rank); v == 0 {
			t.Errorf("prefill %s took no leg", rank)
		}
	}
}

// A decode engine killed after the handoff: its requests migrate to the other
// decode engine (prefilled there from the prompt and the tokens already sent) and
// every client gets its uninterrupted tokens.
func TestPDDecodeEngineKilled(t *testing.T) {
	d := startPDWith(t, 2, 1, nil, []string{"--step-ms", "15"})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.complete(t, pdPrompt(i, 16), 20, i%2 == 0); err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
			}
		}()
	}
	eventually(t, 10*time.Second, "decode legs in flight on decode rank 0", func() bool {
		for _, e := range d.roles(t) {
			if e.Role == "decode" && e.Rank == 0 {
				return e.InFlight > 0
			}
		}
		return false
	})
	_ = d.decode[0].cmd.Process.Signal(syscall.SIGKILL)
	testwait.Wait(t, &wg, "the completions across the killed decode engine")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := scrape(t, d.s.url("/metrics"))
	if v := metricSum(m, "switchyard_migrations_total", `outcome="moved"`); v < 1 {
		t.Errorf("no request migrated off the killed decode engine")
	}
	t.Logf("pairs %v, migrations %v", metricSum(m, "switchyard_pd_pairs_total", ""), metricSum(m, "switchyard_migrations_total", `outcome="moved"`))
}
