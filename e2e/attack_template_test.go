package e2e

// The standing attack suite, chat templates: with --trust-request-chat-template a
// request brings its own Jinja template, which is code. Each template below took
// seconds to minutes and up to GBs before every render had a budget (values
// produced, steps, the request's context); now each is a 400 within
// milliseconds and the process's CPU, RSS and goroutines come back.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

var templateAttacks = []string{
	`{% set x = "a"*60000000 %}{{ x|list|length }}`,
	`{{ "%099999999d"|format(1) }}`,
	`{{ "%.99999999f" % 1.5 }}`,
	`{{ '{:>99999999}'.format('x') }}`,
	`{% set ns = namespace(s="a"*1000) %}{% for i in range(100) %}{% set ns.s = ns.s.replace("a", "aa") %}{% endfor %}{{ ns.s|length }}`,
	`{{ (["a"*100000]*1000)|join }}`,
	`{% set ns = namespace(s="a") %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`,
	`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`,
	`{% macro f(n) %}{% for i in range(100000) %}{{ f(n+1) }}{% endfor %}{% endmacro %}{{ f(0) }}`,
	`{% set l = ["a"*100000]*100 %}{% set m = [l]*100 %}{{ m }}`,
	`{{ [[[[[[[[1]]]]]]]]|tojson(indent=10000000) }}`,
	`{{ range(10**9)|length }}`,
}

// cpuTime is the process's user+system CPU time (/proc/PID/stat, 100 ticks a second).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading /proc/%d/stat: %v", pid, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:])) // fields from 3 (state) on
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// postTemplate sends one chat or /tokenize request carrying src as its template
// (the top-level chat_template; chat_template_kwargs reach the template as
// variables).
func postTemplate(ctx context.Context, tg *target, path, src string, content string) (int, []byte, error) {
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": content}},
		"chat_template": src, "chat_template_kwargs": map[string]any{"enable_thinking": false}}
	if path == "/v1/chat/completions" {
		body["max_tokens"] = 1
	}
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(path), bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// templateTarget is serve with qwen3's tokenizer (its chat template), request
// templates trusted and built-in mock engines, warmed up, its baseline sampled.
func templateTarget(t *testing.T) *target {
	t.Helper()
	s := startServe(t, "--step-ms", "2", "--tokenizer", modelDir(t, "qwen3"), "--trust-request-chat-template")
	tg := &target{server: s, pid: s.cmd.Process.Pid}
	if f := chatsServed(t, tg, 8); f > 0 {
		t.Fatalf("warm-up: %d of 8 chats failed", f)
	}
	tg.base = sampleResources(t, tg.pid, tg.url("/metrics"))
	return tg
}

// chatsServed sends n chats rendered by the model's own template and counts
// those that did not come back 200.
func chatsServed(t *testing.T, tg *target, n int) (failed int) {
	t.Helper()
	for range n {
		code, b := tg.postJSON(t, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}`)
		if code != 200 {
			failed++
			t.Logf("chat: %d %.200s", code, b)
		}
	}
	return failed
}

func TestAttackChatTemplate(t *testing.T) {
	tg := templateTarget(t)
	cpu0 := cpuTime(t, tg.pid)
	start := time.Now()
	sent, failed := 0, 0
	var slowest time.Duration
	for _, src := range templateAttacks {
		for _, path := range []string{"/v1/chat/completions", "/tokenize"} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			code, b, err := postTemplate(ctx, tg, path, src, "hi")
			cancel()
			slowest = max(slowest, time.Since(t0))
			sent++
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(b, &e)
			if err != nil || code != 400 || e.Error.Type != "BadRequestError" || e.Error.Code != 400 ||
				!strings.Contains(e.Error.Message, "budget") && !strings.Contains(e.Error.Message, "MAX_RANGE") {
				failed++
				t.Errorf("%s %q: %d %s (%v), want vLLM's 400", path, src, code, b, err)
			}
		}
	}
	el, used := time.Since(start), cpuTime(t, tg.pid)-cpu0
	t.Logf("%d attack renders: %v wall, %v CPU, slowest answer %v", sent, el, used, slowest)
	if el > 10*time.Second {
		t.Errorf("the attacks took %v", el)
	}
	if f := chatsServed(t, tg, 8); f > 0 {
		t.Errorf("after the attacks: %d of 8 chats with the model's template failed", f)
	}
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, rssSlack(64), 4, 8)
	idle0 := cpuTime(t, tg.pid)
	time.Sleep(time.Second)
	if idle := cpuTime(t, tg.pid) - idle0; idle > 300*time.Millisecond {
		t.Errorf("still busy after the attacks: %v CPU in 1 s", idle)
	}
	attackReport(t, "chat-template", sent, failed, tg.base, after)
}

// TestAttackChatTemplateDisconnect: clients that leave in the middle of long
// renders (within budget: the budget grows with a big message) must not leave
// the renders running.
func TestAttackChatTemplateDisconnect(t *testing.T) {
	tg := templateTarget(t)
	src := `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`
	content := strings.Repeat("x", 900<<10) // under the 1 MiB a message field may have
	// How long one such render runs when nobody leaves.
	t0, c0 := time.Now(), cpuTime(t, tg.pid)
	code, b, err := postTemplate(context.Background(), tg, "/v1/chat/completions", src, content)
	full, fullCPU := time.Since(t0), cpuTime(t, tg.pid)-c0
	if err != nil || code != 400 {
		t.Fatalf("full render: %d %s %v", code, b, err)
	}
	t.Logf("a render to the budget: %v wall, %v CPU", full, fullCPU)
	const n = 8
	c1 := cpuTime(t, tg.pid)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = postTemplate(ctx, tg, "/v1/chat/completions", src, content)
		}()
	}
	time.Sleep(full / 10)
	cancel()
	testwait.Wait(t, &wg, "the clients that left")
	time.Sleep(200 * time.Millisecond)
	left := cpuTime(t, tg.pid) - c1
	t.Logf("%d clients left after %v: %v CPU in all (%v if the renders had run on)", n, full/10, left, n*fullCPU)
	if fullCPU > 400*time.Millisecond && left > n*fullCPU/2 {
		t.Errorf("renders went on after their clients left: %v CPU, a full render %v", left, fullCPU)
	}
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, rssSlack(64), 4, 8)
	attackReport(t, "chat-template-disconnect", n, 0, tg.base, after)
}
