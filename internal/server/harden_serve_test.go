package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// An engine that registers max_model_len 0 or less is kept out of routing with a
// log line; the dispatcher read 0 as "unknown" and took every prompt for it.
func TestEngineNonPositiveMaxModelLen(t *testing.T) {
	for _, n := range []int64{0, -5} {
		f := newFakeCore(t, 0)
		logs := make(chan string, 8)
		ev := &engineEvents{d: f.D, log: slog.New(msgHandler{logs})}
		ev.EngineUp(0, frontend.EngineInfo{Rank: 0, Ready: wire.ReadyResponse{MaxModelLen: wire.SomeInt(n)}})
		waitMsg(t, logs, "refusing engine: invalid max_model_len")
		st := f.D.Engines()
		if len(st) != 1 || st[0].State == dispatcher.EngineStateUp || !strings.Contains(st[0].Cause, "max_model_len") {
			t.Errorf("max_model_len %d: %+v", n, st)
		}
		if _, err := f.D.Submit(context.Background(), mkEngineReq("x")); !errors.Is(err, dispatcher.ErrNoEngines) {
			t.Errorf("max_model_len %d: submit %v, want ErrNoEngines", n, err)
		}
	}
}

func mkEngineReq(id string) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.IgnoreEOS = true
	sp.Normalize()
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1}, Sampling: &sp}
}

// The bootstrap registry's log lines carry component=bootstrap once (serve added
// it, and so did the registry).
func TestServeBootstrapComponentOnce(t *testing.T) {
	var buf lockedBuffer
	startServer(t, func(c *Config) {
		c.BootstrapAddress = "127.0.0.1:0"
		c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), `"component":"bootstrap"`) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the registry logs from its own goroutine
	}
	seen := 0
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if n := strings.Count(line, `"component":"bootstrap"`); n > 0 {
			seen++
			if strings.Count(line, `"component"`) != 1 {
				t.Errorf("component repeated: %s", line)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no bootstrap log line in:\n%s", buf.String())
	}
}

// During the drain a new HTTP request gets the 503 the README promises; the
// listener used to close at once (connection refused, or a broken pipe).
func TestServeShutdownAnswers503(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HTTPAddress = "127.0.0.1:0"
	cfg.ClientAddress = ""
	cfg.MockEngines = 1
	cfg.MockStep = 20 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.HTTPAddr()
	long := make(chan error, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 40}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		long <- err
	}()
	for deadline := time.Now().Add(testwait.Deadline); s.d.InFlight() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long request never became in flight")
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	for deadline := time.Now().Add(testwait.Deadline); s.shutdownReason.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the drain never started")
		}
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testwait.Deadline}
	resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 1}`))
	if err != nil {
		t.Fatalf("new request during the drain: %v; want a 503", err)
	}
	var e httpapi.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(e.Error.Message, "shutting down") {
		t.Errorf("new request during the drain: %d %+v", resp.StatusCode, e)
	}
	if err := testwait.Recv(t, long, "the in-flight request"); err != nil {
		t.Errorf("in-flight request: %v", err)
	}
	if err := testwait.Recv(t, shut, "Shutdown"); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// msgHandler sends each log message to a channel (non-blocking).
type msgHandler struct{ ch chan string }

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgHandler) WithGroup(string) slog.Handler      { return h }

func waitMsg(t *testing.T, ch chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if m == want {
				return
			}
		case <-deadline:
			t.Fatalf("no log %q", want)
		}
	}
}
