package e2e

import (
	"cmp"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/minitok"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/servertest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
	"github.com/switchyard-llm/switchyard/wire"
)

// embeddedTokenizer is the built-in model's tokenizer, as serve loads it.
func embeddedTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tj, err := minitok.FS.ReadFile("tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := minitok.FS.ReadFile("tokenizer_config.json")
	tk, err := tokenizer.LoadWithConfig(tj, tc)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

type rerankResult struct {
	Index    int
	Document struct {
		Text       string
		MultiModal any `json:"multi_modal"`
	}
	Relevance_score float64
}

type rerankAnswer struct {
	ID      string
	Model   string
	Usage   struct{ Prompt_tokens, Total_tokens int }
	Results []rerankResult
}

type scoreAnswer struct {
	ID, Object, Model string
	Data              []struct {
		Index  int
		Object string
		Score  float64
	}
	Usage struct{ Prompt_tokens, Total_tokens int }
}

// TestRerankScoreClassifyCrossEncoder: switchyard fronting mock engines that serve
// a cross-encoder (tasks classify and score, as engines of the releases that list
// score do), one engine of each vLLM release's layout, requests spread round-robin: a Cohere/Jina-style rerank on each of its three paths, /score in its
// request variants and /classify answer what the engines compute for each (query,
// document) pair joined by the tokenizer, one engine request per pair, sorted and
// cut to top_n, with every pair's tokens in the usage.
func TestRerankScoreClassifyCrossEncoder(t *testing.T) {
	layouts := strings.Join(wire.LayoutNames(), ",")
	s := startServe(t, "--mock-pooling", "classify,score", "--mock-engines", "6", "--mock-engine-layouts", layouts, "--lb-policy", "round-robin")
	tk := embeddedTokenizer(t)
	model := &mockengine.PoolingModel{}
	query := "What is the capital of France?"
	docs := []string{"The capital of Brazil is Brasilia.", "The capital of France is Paris.", "Cross-encoder models are neat"}
	pairScore := func(q, d string, act bool) (float64, int) {
		ids, _, err := tk.EncodePair(q, d, true, tokenizer.Truncation{})
		if err != nil {
			t.Fatal(err)
		}
		_, v := model.PoolingValues(ids, &wire.PoolingParams{Task: "score", Activation: wire.OptBool{Value: act, Valid: true}})
		return v[0], len(ids)
	}
	want := make([]float64, len(docs))
	tokens := 0
	for i, d := range docs {
		var n int
		want[i], n = pairScore(query, d, true)
		tokens += n
	}
	order := []int{0, 1, 2}
	sort.SliceStable(order, func(i, j int) bool { return want[order[i]] > want[order[j]] })

	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		body, _ := json.Marshal(map[string]any{"model": "switchyard", "query": query, "documents": docs, "top_n": 2, "return_documents": true})
		code, out := s.postJSON(t, path, string(body))
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, out)
		}
		var got rerankAnswer
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.ID, "score-") || got.Model != "switchyard" || len(got.Results) != 2 ||
			got.Usage.Prompt_tokens != tokens || got.Usage.Total_tokens != tokens {
			t.Fatalf("%s: %s (want 2 results, %d tokens)", path, out, tokens)
		}
		for k, r := range got.Results {
			i := order[k]
			if r.Index != i || r.Document.Text != docs[i] || float32(r.Relevance_score) != float32(want[i]) {
				t.Fatalf("%s result %d: %+v, want document %d score %v", path, k, r, i, want[i])
			}
		}
	}

	// /score: 1:N, N:N (text_1/text_2), and use_activation false.
	code, out := s.postJSON(t, "/score", `{"queries": "`+query+`", "documents": ["`+docs[0]+`", "`+docs[1]+`"]}`)
	var sc scoreAnswer
	if code != 200 || json.Unmarshal(out, &sc) != nil || len(sc.Data) != 2 || sc.Object != "list" {
		t.Fatalf("/score 1:N: %d %s", code, out)
	}
	for i, d := range sc.Data {
		if d.Index != i || d.Object != "score" || float32(d.Score) != float32(want[i]) {
			t.Fatalf("/score 1:N item %d: %+v, want %v", i, d, want[i])
		}
	}
	code, out = s.postJSON(t, "/v1/score", `{"text_1": ["a", "b"], "text_2": ["c", "d"], "use_activation": false}`)
	if code != 200 || json.Unmarshal(out, &sc) != nil || len(sc.Data) != 2 {
		t.Fatalf("/v1/score N:N: %d %s", code, out)
	}
	for i, pair := range [][2]string{{"a", "c"}, {"b", "d"}} {
		if w, _ := pairScore(pair[0], pair[1], false); float32(sc.Data[i].Score) != float32(w) {
			t.Fatalf("N:N, no activation, pair %d: %v, want %v", i, sc.Data[i].Score, w)
		}
	}
	code, out = s.postJSON(t, "/score", `{"queries": ["a", "b"], "documents": ["c", "d", "e"]}`)
	if code != 400 || !strings.Contains(string(out), "Input lengths must be either 1:1, 1:N or N:N") {
		t.Fatalf("2:3: %d %s", code, out)
	}

	// /classify: the engines' class probabilities and the first largest's label.
	code, out = s.postJSON(t, "/classify", `{"input": ["This product was excellent", "meh"]}`)
	var cl struct {
		ID, Object string
		Data       []struct {
			Index       int
			Label       *string
			Probs       []float64
			Num_classes int
		}
		Usage struct{ Prompt_tokens int }
	}
	if code != 200 || json.Unmarshal(out, &cl) != nil || len(cl.Data) != 2 || !strings.HasPrefix(cl.ID, "classify-") {
		t.Fatalf("/classify: %d %s", code, out)
	}
	for i, text := range []string{"This product was excellent", "meh"} {
		_, probs := model.PoolingValues(tk.Encode(text, true), &wire.PoolingParams{Task: "classify"})
		best := 0
		for j, p := range probs {
			if p > probs[best] {
				best = j
			}
		}
		d := cl.Data[i]
		if !close32(d.Probs, probs) || d.Num_classes != len(probs) || d.Label == nil || *d.Label != "LABEL_"+string(rune('0'+best)) {
			t.Fatalf("/classify item %d: %+v, want probs %v", i, d, probs)
		}
	}
}

// TestScoreBiEncoder: with an embedding model a score is the cosine of the query's
// and the document's embeddings, each its own engine request; the usage counts the
// pad token vLLM puts between them; /classify does not exist for it.
func TestScoreBiEncoder(t *testing.T) {
	s := startServe(t, "--mock-pooling", "embed")
	tk := embeddedTokenizer(t)
	model := &mockengine.PoolingModel{}
	emb := func(text string) ([]float64, int) {
		ids := tk.Encode(text, true)
		_, v := model.PoolingValues(ids, &wire.PoolingParams{Task: "embed", Activation: wire.OptBool{Value: true, Valid: true}})
		return v, len(ids)
	}
	q, nq := emb("hello")
	docs := []string{"hello there", "goodbye"}
	body, _ := json.Marshal(map[string]any{"query": "hello", "documents": docs})
	code, out := s.postJSON(t, "/rerank", string(body))
	var got rerankAnswer
	if code != 200 || json.Unmarshal(out, &got) != nil || len(got.Results) != 2 {
		t.Fatalf("/rerank: %d %s", code, out)
	}
	tokens := 0
	for _, r := range got.Results {
		d, nd := emb(docs[r.Index])
		tokens += nq + 1 + nd
		var dot, n1, n2 float64
		for i := range q {
			dot, n1, n2 = dot+q[i]*d[i], n1+q[i]*q[i], n2+d[i]*d[i]
		}
		if w := dot / math.Sqrt(n1*n2); math.Abs(r.Relevance_score-w) > 1e-5 {
			t.Fatalf("document %d: score %v, want cosine %v", r.Index, r.Relevance_score, w)
		}
	}
	sorted := slices.IsSortedFunc(got.Results, func(a, b rerankResult) int { return cmp.Compare(b.Relevance_score, a.Relevance_score) })
	if got.Usage.Prompt_tokens != tokens || !sorted {
		t.Fatalf("usage %d (want %d) or order: %s", got.Usage.Prompt_tokens, tokens, out)
	}
	code, out = s.postJSON(t, "/classify", `{"input": "hello"}`)
	if code != 404 || strings.TrimSpace(string(out)) != `{"detail":"Not Found"}` {
		t.Fatalf("/classify on an embedding model: %d %s", code, out)
	}
}

// TestRerankCohereSDK: Cohere's official SDK, v2 and v1 clients, reranks through
// switchyard fronting mock cross-encoder engines: results sorted by relevance with the
// engines' scores, top_n honoured, documents echoed.
func TestRerankCohereSDK(t *testing.T) {
	node, openai := openaiModule(t)
	module := filepath.Join(filepath.Dir(openai), "cohere-ai")
	if _, err := os.Stat(filepath.Join(module, "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the cohere-ai npm package is needed (.ci/run installs it): %v", err)
		}
		t.Skipf("the cohere-ai npm package is needed (.ci/run installs it): %v", err)
	}
	s := startServe(t, "--mock-pooling", "classify,score")
	tk := embeddedTokenizer(t)
	model := &mockengine.PoolingModel{}
	query := "What is the capital of France?"
	docs := []string{"The capital of Brazil is Brasilia.", "The capital of France is Paris.", "Cross-encoder models are neat"}
	want := make([]float64, len(docs))
	for i, d := range docs {
		ids, _, _ := tk.EncodePair(query, d, true, tokenizer.Truncation{})
		_, v := model.PoolingValues(ids, &wire.PoolingParams{Task: "score", Activation: wire.OptBool{Value: true, Valid: true}})
		want[i] = v[0]
	}
	order := []int{0, 1, 2}
	sort.SliceStable(order, func(i, j int) bool { return want[order[i]] > want[order[j]] })
	dj, _ := json.Marshal(docs)
	cmd := testwait.Command(t, time.Minute, node, "testdata/cohere_rerank.cjs")
	cmd.Env = append(os.Environ(), "COHERE_MODULE="+module, "BASE_URL=http://"+s.http, "QUERY="+query, "DOCUMENTS="+string(dj))
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("cohere SDK: %v\n%s\n%s", err, out, stderr)
	}
	type result struct {
		Index          int
		RelevanceScore float64
		Document       *struct{ Text string }
	}
	var got struct{ V2, V1 struct{ Results []result } }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	check := func(name string, rs []result, n int) {
		if len(rs) != n {
			t.Fatalf("%s: %d results, want %d: %s", name, len(rs), n, out)
		}
		for k, r := range rs {
			i := order[k]
			if r.Index != i || float32(r.RelevanceScore) != float32(want[i]) || r.Document == nil || r.Document.Text != docs[i] {
				t.Fatalf("%s result %d: %+v, want document %d score %v", name, k, r, i, want[i])
			}
		}
	}
	check("v2 (top_n 2)", got.V2.Results, 2)
	check("v1", got.V1.Results, 3)
}

// TestScoreTypeIDsBertTokenizer: a model whose tokenizer class returns token type
// ids (BERT's) gets each pair's split sent as extra_kwargs, pairs with different
// splits (N:N with queries of different lengths) in concurrent groups, the answers
// still in pair order.
func TestScoreTypeIDsBertTokenizer(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"tokenizer.json":        string(servertest.BertPairTokenizerJSON()),
		"tokenizer_config.json": `{"tokenizer_class": "BertTokenizer", "pad_token": "[PAD]"}`,
		"config.json":           `{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}, "max_position_embeddings": 512}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, "--tokenizer", dir, "--mock-pooling", "classify,score")
	tk, err := tokenizer.LoadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	model := &mockengine.PoolingModel{}
	queries, docs := []string{"what is it?", "why?", "what is it?"}, []string{"a cat.", "a dog.", "a bird."}
	body, _ := json.Marshal(map[string]any{"queries": queries, "documents": docs})
	code, out := s.postJSON(t, "/score", string(body))
	var sc scoreAnswer
	if code != 200 || json.Unmarshal(out, &sc) != nil || len(sc.Data) != 3 {
		t.Fatalf("/score: %d %s", code, out)
	}
	tokens := 0
	for i := range docs {
		ids, _, _ := tk.EncodePair(queries[i], docs[i], true, tokenizer.Truncation{})
		_, v := model.PoolingValues(ids, &wire.PoolingParams{Task: "score", Activation: wire.OptBool{Value: true, Valid: true}})
		tokens += len(ids)
		if sc.Data[i].Index != i || float32(sc.Data[i].Score) != float32(v[0]) {
			t.Fatalf("pair %d: %+v, want %v", i, sc.Data[i], v[0])
		}
	}
	if sc.Usage.Prompt_tokens != tokens {
		t.Fatalf("usage %d, want %d", sc.Usage.Prompt_tokens, tokens)
	}
}
