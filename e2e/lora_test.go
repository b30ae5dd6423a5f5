package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// TestLoRA: serve --enable-lora with a --lora-modules adapter in front of mock
// engines of three vLLM releases whose LoRARequest differs (newest: 7 fields;
// v0.18: 6, no is_3d_lora_weight; v0.11: 7 with lora_local_path and
// long_lora_max_len): /v1/models lists the adapter; a completion naming it
// reaches an engine with the LoRARequest in that engine's release's shape (the
// mock seeds its answer with the adapter's name), on every release when pinned,
// and stays on the engine that served it; the base model's answer is the
// plain one; load and unload work through every engine (a missing path is the
// engine's 404), are admin endpoints, and an unknown model is vLLM's 404.
func TestLoRA(t *testing.T) {
	dir := t.TempDir()
	sql, chat := filepath.Join(dir, "sql"), filepath.Join(dir, "chat")
	for _, d := range []string{sql, chat} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, "--enable-lora", "--max-loras", "2", "--lora-modules", "sql="+sql,
		"--mock-engines", "3", "--mock-engine-layouts", "newest,v0.18,v0.11", "--lb-policy", "round-robin")
	eventually(t, 30*time.Second, "three engines ready", func() bool {
		ready := 0
		for _, e := range s.engines(t) {
			if e.Ready {
				ready++
			}
		}
		return ready == 3
	})

	models := func() map[string][2]string {
		code, b := s.get(t, "/v1/models")
		var v struct {
			Data []struct {
				ID, Root string
				Parent   *string
			}
		}
		if err := json.Unmarshal(b, &v); code != 200 || err != nil {
			t.Fatalf("/v1/models %d %s", code, b)
		}
		out := map[string][2]string{}
		for _, m := range v.Data {
			p := ""
			if m.Parent != nil {
				p = *m.Parent
			}
			out[m.ID] = [2]string{m.Root, p}
		}
		return out
	}
	if m := models(); m["sql"] != [2]string{sql, "switchyard"} || len(m) != 2 {
		t.Fatalf("/v1/models: %v", m)
	}

	prompt := []int64{5, 6, 7}
	complete := func(model string, hdr ...string) (int, []int64, string, string) {
		t.Helper()
		body := `{"prompt": [5, 6, 7], "max_tokens": 6, "ignore_eos": true, "model": "` + model + `"}`
		resp, b, err := s.post(context.Background(), body, hdr...)
		if err != nil {
			t.Fatal(err)
		}
		var c completion
		_ = json.Unmarshal(b, &c)
		var toks []int64
		if len(c.Choices) == 1 {
			toks = c.Choices[0].TokenIDs
		}
		return resp.StatusCode, toks, resp.Header.Get("X-data-parallel-rank"), string(b)
	}
	ranks := map[string]bool{}
	for range 6 {
		code, toks, rank, b := complete("sql")
		if code != 200 || !slices.Equal(toks, mockengine.TokensForLoRA("sql", prompt, 6)) {
			t.Fatalf("model sql: %d %s; want the adapter's tokens %v", code, b, mockengine.TokensForLoRA("sql", prompt, 6))
		}
		ranks[rank] = true
	}
	// One rank only: round-robin alone would rotate, but the LoRA router keeps
	// sending the adapter where it was just served, that engine being no busier.
	if len(ranks) != 1 {
		t.Errorf("LoRA requests went to ranks %v; want one", ranks)
	}
	// Each release's engine decodes its own LoRARequest shape and serves it.
	for rank := range 3 {
		r := strconv.Itoa(rank)
		code, toks, got, b := complete("sql", "X-data-parallel-rank", r)
		if code != 200 || got != r || !slices.Equal(toks, mockengine.TokensForLoRA("sql", prompt, 6)) {
			t.Fatalf("model sql pinned to rank %s: %d rank %q %s", r, code, got, b)
		}
	}
	if code, toks, _, b := complete("switchyard"); code != 200 || !slices.Equal(toks, mockengine.TokensFor(prompt, 6)) {
		t.Fatalf("the base model: %d %s", code, b)
	}
	if code, _, _, b := complete("nope"); code != 404 || !strings.Contains(b, "The model `nope` does not exist.") {
		t.Fatalf("unknown model: %d %s", code, b)
	}

	admin := func(path, body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.url(path), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, sb.String()
	}
	load := `{"lora_name": "chat", "lora_path": "` + chat + `"}`
	if code, b := admin("/v1/load_lora_adapter", load, "X-Forwarded-For", "203.0.113.9"); code != 403 {
		t.Fatalf("a proxied load (not the admin network): %d %s", code, b)
	}
	if code, b := admin("/v1/load_lora_adapter", load); code != 200 || b != "Success: LoRA adapter 'chat' added successfully." {
		t.Fatalf("load: %d %s", code, b)
	}
	if code, b := admin("/v1/load_lora_adapter", load); code != 400 || !strings.Contains(b, "has already been loaded") {
		t.Fatalf("load again: %d %s", code, b)
	}
	if m := models(); m["chat"] != [2]string{chat, "switchyard"} {
		t.Fatalf("/v1/models after the load: %v", m)
	}
	if code, toks, _, b := complete("chat"); code != 200 || !slices.Equal(toks, mockengine.TokensForLoRA("chat", prompt, 6)) {
		t.Fatalf("model chat: %d %s", code, b)
	}
	missing := filepath.Join(dir, "missing")
	code, b := admin("/v1/load_lora_adapter", `{"lora_name": "gone", "lora_path": "`+missing+`"}`)
	if code != 404 || !strings.Contains(b, "Loading lora gone failed: No adapter found for "+missing) {
		t.Fatalf("a path no engine finds: %d %s", code, b)
	}
	if code, b := admin("/v1/unload_lora_adapter", `{"lora_name": "chat"}`); code != 200 || b != "Success: LoRA adapter 'chat' removed successfully." {
		t.Fatalf("unload: %d %s", code, b)
	}
	if code, b := admin("/v1/unload_lora_adapter", `{"lora_name": "chat", "lora_int_id": 2}`); code != 404 || !strings.Contains(b, "The lora adapter 'chat' cannot be found.") {
		t.Fatalf("unload again: %d %s", code, b)
	}
	if code, _, _, b := complete("chat"); code != 404 || !strings.Contains(b, "The model `chat` does not exist.") {
		t.Fatalf("an unloaded adapter: %d %s", code, b)
	}
	if m := models(); len(m) != 2 {
		t.Fatalf("/v1/models after the unload: %v", m)
	}
	eventually(t, 10*time.Second, "vllm:lora_requests_info with max_lora 2", func() bool {
		_, b := s.get(t, "/metrics")
		return strings.Contains(string(b), `vllm:lora_requests_info{max_lora="2"`)
	})
}

// startLoRAEngine runs `switchyard mock-engine --max-loras 2` for rank.
func startLoRAEngine(t *testing.T, handshake string, rank int) *proc {
	t.Helper()
	return start(t, "mock-engine "+strconv.Itoa(rank), "mock-engine", "--handshake-address", handshake,
		"--data-parallel-rank", strconv.Itoa(rank), "--data-parallel-size", "2", "--step-ms", "2", "--max-loras", "2")
}

// waitAdapters waits until the engine logged add_lora for every name.
func waitAdapters(t *testing.T, p *proc, names ...string) {
	t.Helper()
	eventually(t, 20*time.Second, p.name+" given adapters "+strings.Join(names, ", "), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		got := map[string]bool{}
		for _, l := range p.lines {
			if l["msg"] == "mock engine: LoRA adapter added" {
				got[l["name"].(string)] = true
			}
		}
		for _, n := range names {
			if !got[n] {
				return false
			}
		}
		return true
	})
}

// Engines in their own processes: one that joins after an adapter was loaded,
// and one killed and restarted, are sent every adapter (the --lora-modules one
// and the loaded one) as they come up, as vLLM's engines of one frontend hold
// them all.
func TestLoRAEnginesJoiningLater(t *testing.T) {
	dir := t.TempDir()
	sql, chat := filepath.Join(dir, "sql"), filepath.Join(dir, "chat")
	for _, d := range []string{sql, chat} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2", "--engine-transport", "tcp",
		"--enable-lora", "--lora-modules", "sql="+sql)
	e0 := startLoRAEngine(t, s.handshake, 0)
	eventually(t, 20*time.Second, "rank 0 ready", func() bool { return ready(t, s, 0) })
	waitAdapters(t, e0, "sql")
	req, _ := http.NewRequest(http.MethodPost, s.url("/v1/load_lora_adapter"), strings.NewReader(`{"lora_name": "chat", "lora_path": "`+chat+`"}`))
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("load: %d", resp.StatusCode)
	}
	waitAdapters(t, e0, "sql", "chat")

	e1 := startLoRAEngine(t, s.handshake, 1)
	eventually(t, 20*time.Second, "rank 1 ready", func() bool { return ready(t, s, 1) })
	waitAdapters(t, e1, "sql", "chat")

	e0.stop(syscall.SIGKILL, 10*time.Second)
	eventually(t, 20*time.Second, "rank 0 down", func() bool { return !ready(t, s, 0) })
	again := startLoRAEngine(t, s.handshake, 0)
	eventually(t, 20*time.Second, "rank 0 back", func() bool { return ready(t, s, 0) })
	waitAdapters(t, again, "sql", "chat")
}
