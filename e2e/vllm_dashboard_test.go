package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// dashboardModel is the --served-model-name the dashboard's $model_name selects.
const dashboardModel = "dash-model"

// vLLM's own Grafana dashboard (testdata/vllm-grafana.json, from vLLM's repository)
// against a loaded switchyard: a real Prometheus scrapes serve's /metrics every
// second, and every PromQL expression of every panel, and the $model_name variable's
// query, must return data. In CI (CI set) a missing prometheus fails the test.
func TestVLLMGrafanaDashboard(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus not installed (Debian package prometheus; .ci/run installs it): the vLLM dashboard test cannot run")
		}
		t.Skip("prometheus not installed (apt-get install prometheus); set CI=1 to make this a failure")
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	raw, err := os.ReadFile("testdata/vllm-grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}

	s := startServe(t, "--bootstrap-address", "127.0.0.1:0", "--served-model-name", dashboardModel)

	// Load: a few clients in a loop, streaming and not, repeated prompts (prefix
	// cache hits), until the queries are done.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"prompt": [%d, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18], "max_tokens": %d, "stream": %v}`,
					i%3, 8+c*8, c%2 == 0)
				_, _, _ = s.post(ctx, body)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	defer func() { cancel(); testwait.Wait(t, &wg, "the load to stop") }()

	promAddr := freeLoopbackAddr(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: switchyard
    static_configs:
      - targets: [%q]
`, s.http)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	prom := exec.CommandContext(pctx, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	var promLog strings.Builder
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		pcancel()
		testwait.Func(t, "prometheus to exit after the kill", func() { _ = prom.Wait() })
		if t.Failed() {
			t.Logf("prometheus log:\n%s", promLog.String())
		}
	}()

	api := func(path string, q url.Values) (json.RawMessage, error) {
		resp, err := httpc.Get("http://" + promAddr + path + "?" + q.Encode())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var v struct {
			Status string          `json:"status"`
			Data   json.RawMessage `json:"data"`
			Error  string          `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return nil, err
		}
		if v.Status != "success" {
			return nil, fmt.Errorf("%s: %s", v.Status, v.Error)
		}
		return v.Data, nil
	}

	// The dashboard's $model_name: label_values({__name__=~"vllm:.*"},model_name).
	var modelVar string
	for _, v := range dash.Templating.List {
		if v.Name == "model_name" {
			modelVar = v.Definition
		}
	}
	sel, ok := strings.CutPrefix(modelVar, "label_values(")
	sel, ok2 := strings.CutSuffix(sel, ",model_name)")
	if !ok || !ok2 {
		t.Fatalf("model_name variable %q is not label_values(selector,model_name)", modelVar)
	}
	eventually(t, 30*time.Second, "Prometheus to scrape the vllm:* series", func() bool {
		d, err := api("/api/v1/label/model_name/values", url.Values{"match[]": {sel}})
		var names []string
		return err == nil && json.Unmarshal(d, &names) == nil && len(names) == 1 && names[0] == dashboardModel
	})

	// $__rate_interval is Grafana's max(4 × scrape interval, step + scrape interval):
	// 4s at a 1 s scrape. Every expression is retried for a while under load, since
	// a rate needs two samples of a series that has moved.
	replacer := strings.NewReplacer("$model_name", dashboardModel, "$__rate_interval", "4s")
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			n++
			expr := replacer.Replace(tg.Expr)
			var last string
			deadline := time.Now().Add(20 * time.Second)
			for {
				d, err := api("/api/v1/query", url.Values{"query": {expr}})
				if err == nil {
					if ok, why := hasData(d); ok {
						break
					} else {
						last = why
					}
				} else {
					last = err.Error()
				}
				if time.Now().After(deadline) {
					t.Errorf("panel %q target %s: %s returns no data (%s)", p.Title, tg.RefID, expr, last)
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
	if n < 25 {
		t.Errorf("the dashboard has %d expressions; testdata/vllm-grafana.json looks truncated", n)
	}
	t.Logf("%d panels, %d expressions, each returned data", len(dash.Panels), n)
}

// hasData reports whether an instant query's result has a sample with a finite value.
func hasData(d json.RawMessage) (bool, string) {
	var r struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(d, &r); err != nil {
		return false, err.Error()
	}
	if len(r.Result) == 0 {
		return false, "empty " + r.ResultType
	}
	for _, s := range r.Result {
		str, _ := s.Value[1].(string)
		if v, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%d series, none finite", len(r.Result))
}

// freeLoopbackAddr is a loopback TCP address free a moment ago, below Linux's
// ephemeral range (32768-60999): a port the kernel hands out for a bind to port 0
// (serve's own sockets, the engines' connections) could be given away between this
// check and the caller's bind, which made the P/D tests fail with "address already
// in use" now and then. Only an explicit bind can take one of these.
//
// A port is handed out once per test binary: two picks in one test could
// otherwise draw the same free port (TestScaleOut's bootstrap address and a
// frontend's output did, in CI).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		defer l.Close()
		return l.Addr().String()
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

// handedOut holds the ports freeLoopbackAddr returned.
var handedOut sync.Map
