package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/servertest"
	"github.com/switchyard-llm/switchyard/wire"
)

// scoreTestAPI is an API over a model directory with the tiny BERT tokenizer and
// the given config.json, with a context of maxLen tokens.
func scoreTestAPI(t *testing.T, maxLen int64, config string) *API {
	t.Helper()
	dir := t.TempDir()
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tc := `{"tokenizer_class": "BertTokenizer", "pad_token": "[PAD]"}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := NewTokenizer(servertest.BertPairTokenizerJSON(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := &Text{Name: "m", Root: dir, Tokenizer: tok, SpecialTokens: map[string]string{"pad_token": "[PAD]"}}
	return &API{text: text, now: time.Now, contextLen: func(int) int64 { return maxLen }}
}

func ids(tok TextTokenizer, s string) []int64 { return tok.Encode(s, false) }

// TestScoreInputErrors ports vLLM's input checks: the four request variants, the
// 1:1, 1:N, N:N rule and its messages, in vLLM's order.
func TestScoreInputErrors(t *testing.T) {
	a := scoreTestAPI(t, 100, `{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}}`)
	for _, c := range []struct {
		body   string
		rerank bool
		err    string
		q, d   int
	}{
		{body: `{"queries": "a", "documents": ["b", "c"]}`, q: 1, d: 2},
		{body: `{"queries": ["a", "b"], "items": ["b", "c"]}`, q: 2, d: 2},
		{body: `{"data_1": "a", "data_2": "b"}`, q: 1, d: 1},
		{body: `{"text_1": ["a"], "text_2": ["b", "c", "d"]}`, q: 1, d: 3},
		{body: `{"text_1": ["a", "b"], "text_2": ["b", "c", "d"]}`, err: "Input lengths must be either 1:1, 1:N or N:N"},
		{body: `{"queries": [], "documents": ["b"]}`, err: "At least one text element must be given"},
		{body: `{"queries": "a", "documents": []}`, err: "At least one text_pair element must be given"},
		{body: `{"queries": "a"}`, err: "Field required"},
		{body: `{"queries": "a", "documents": [{"content": [{"type": "image_url"}]}]}`, err: "MultiModalParam is not supported for BertForSequenceClassification"},
		{body: `{"queries": 1, "documents": "b"}`, err: "queries must be a string or a list of strings"},
		{body: `{"query": "a", "documents": ["b", "c"]}`, rerank: true, q: 1, d: 2},
		{body: `{"query": ["a"], "documents": ["b"]}`, rerank: true, err: "query must be a string"},
		{body: `{"query": "a", "documents": "b"}`, rerank: true, q: 1, d: 1},
		{body: `{"query": "a", "documents": [` + strings.Repeat(`"d", `, maxScoreInputs) + `"d"]}`, rerank: true,
			err: "documents has 1001 items, more than the limit of 1000"},
	} {
		var req scoreRequest
		if err := readObject(strings.NewReader(c.body), 1000, &req, nil); err != nil {
			t.Fatal(err)
		}
		q, d, apiErr := a.scoreSides(&req, c.rerank)
		switch {
		case c.err != "" && (apiErr == nil || !strings.Contains(apiErr.Message, c.err)):
			t.Errorf("%s: got %v, want error %q", c.body, apiErr, c.err)
		case c.err == "" && (apiErr != nil || len(q) != c.q || len(d) != c.d):
			t.Errorf("%s: got %d/%d %v", c.body, len(q), len(d), apiErr)
		}
	}
}

// TestCrossEncoderPairs: each pair is tokenizer(text=query, text_pair=doc), the query
// repeated for 1:N; max_tokens_per_doc cuts only the document; the type ids split
// where the document starts.
func TestCrossEncoderPairs(t *testing.T) {
	a := scoreTestAPI(t, 40, `{"id2label": {"0": "LABEL_0"}}`)
	tok := a.text.Tokenizer
	plan := &scorePlan{kind: scoreKind{cross: true, task: "classify"}}
	tp := &tokParams{maxLen: 40}
	if e := a.crossPrompts(context.Background(), plan, []string{"what is it?"}, []string{"a cat.", "a dog and a bird."}, tp, 0, 0); e != nil {
		t.Fatal(e)
	}
	q := ids(tok, "what is it?")
	want0 := slices.Concat([]int64{0}, q, []int64{1}, ids(tok, "a cat."), []int64{1})
	if len(plan.job.Prompts) != 2 || !slices.Equal(plan.job.Prompts[0], want0) {
		t.Fatalf("pairs %v, want first %v", plan.job.Prompts, want0)
	}
	plan = &scorePlan{kind: plan.kind}
	if e := a.crossPrompts(context.Background(), plan, []string{"what is it?"}, []string{"a dog and a bird."}, tp, 0, 3); e != nil {
		t.Fatal(e)
	}
	want := slices.Concat([]int64{0}, q, []int64{1}, ids(tok, "a d"), []int64{1})
	if !slices.Equal(plan.job.Prompts[0], want) {
		t.Fatalf("max_tokens_per_doc 3: %v, want %v", plan.job.Prompts[0], want)
	}
	if !slices.Equal(plan.typeSplits, []int{len(q) + 2}) {
		t.Fatalf("type splits %v, want [%d] (BertTokenizer returns type ids)", plan.typeSplits, len(q)+2)
	}
	_, types, _ := a.text.Tokenizer.(pairTokenizer).EncodePair("ab", "c", true, tp.cut())
	if k, ok := typeSplit(types); !ok || k != 4 {
		t.Fatalf("type ids %v split at %d", types, k)
	}
}

// TestScoreTruncationAndLength ports vLLM's test_score_api_max_model_len and the
// truncation checks: an over-long pair is refused with the renderer's message (the
// tokenizer cut it at max_model_len + 1, hence "at least"), truncate_prompt_tokens
// above max_model_len is refused, and a valid one keeps the pair within it.
func TestScoreTruncationAndLength(t *testing.T) {
	a := scoreTestAPI(t, 20, "")
	long := strings.Repeat("what is the capital of france?", 3)
	plan := &scorePlan{kind: scoreKind{cross: true, task: "classify"}}
	e := a.crossPrompts(context.Background(), plan, []string{long}, []string{"paris."}, &tokParams{maxLen: 20}, 0, 0)
	want := "This model's maximum context length is 20 tokens. However, you requested 0 output tokens and your prompt contains at least 21 input tokens, for a total of at least 21 tokens. Please reduce the length of the input prompt or the number of requested output tokens."
	if e == nil || e.Message != want {
		t.Fatalf("got %v, want %q", e, want)
	}
	k := int64(21)
	if e := (&tokParams{maxLen: 20, truncate: &k}).validate(); e == nil || !strings.Contains(e.Message, "Please request a smaller truncation size.") {
		t.Fatalf("truncate 21 > 20: %v", e)
	}
	k = 12
	plan = &scorePlan{kind: plan.kind}
	if e := a.crossPrompts(context.Background(), plan, []string{long}, []string{"paris."}, &tokParams{maxLen: 20, truncate: &k}, 0, 0); e != nil {
		t.Fatal(e)
	}
	p := plan.job.Prompts[0]
	if len(p) != 12 || p[0] != 0 || p[len(p)-1] != 1 {
		t.Fatalf("truncated pair %v: want 12 ids, [CLS] first, [SEP] last", p)
	}
	side := "left"
	plan = &scorePlan{kind: plan.kind}
	if e := a.crossPrompts(context.Background(), plan, []string{long}, []string{"paris."}, &tokParams{maxLen: 20, truncate: &k, side: side}, 0, 0); e != nil {
		t.Fatal(e)
	}
	if p := plan.job.Prompts[0]; len(p) != 12 || p[len(p)-1] != 1 || p[0] == 0 {
		t.Fatalf("left side: %v (vLLM slices the ids, [CLS] goes)", p)
	}
	if _, e := a.tokenLimit("max_tokens_per_doc", &k); e != nil {
		t.Fatal(e)
	}
	for _, c := range []struct {
		v    int64
		want string
	}{{-1, "max_tokens_per_doc must be a non-negative integer"}, {20, "max_tokens_per_doc (20) must be less than max_model_len (20)."}} {
		if _, e := a.tokenLimit("max_tokens_per_doc", &c.v); e == nil || e.Message != c.want {
			t.Errorf("%d: %v, want %q", c.v, e, c.want)
		}
	}
}

// TestPairTextBound: a query repeated over many documents is refused before any
// tokenizing when the pairs' text passes the bound.
func TestPairTextBound(t *testing.T) {
	a := scoreTestAPI(t, 0, "")
	docs := make([]string, maxScoreInputs)
	plan := &scorePlan{kind: scoreKind{cross: true, task: "classify"}}
	e := a.crossPrompts(context.Background(), plan, []string{strings.Repeat("a", maxPairTextBytes/maxScoreInputs+1)}, docs, &tokParams{}, 0, 0)
	if e == nil || !strings.Contains(e.Message, "more than the limit of") || len(plan.job.Prompts) != 0 {
		t.Fatalf("got %v", e)
	}
}

// TestBiEncoderScores: queries and documents are embedded alone, the score is the
// cosine, usage counts query + pad + document per pair (the query once per pair).
func TestBiEncoderScores(t *testing.T) {
	a := scoreTestAPI(t, 50, "")
	plan := &scorePlan{kind: scoreKind{task: "embed"}}
	if e := a.biPrompts(plan, []string{"ab"}, []string{"ab", "cd"}, &tokParams{maxLen: 50}, 0, 0); e != nil {
		t.Fatal(e)
	}
	if len(plan.job.Prompts) != 3 || plan.padExtra != 1 || plan.nQueries != 1 {
		t.Fatalf("plan %+v", plan)
	}
	answers := []pooled{
		{Shape: []int64{2}, Data: []float32{1, 0}, PromptTokens: 4},
		{Shape: []int64{2}, Data: []float32{2, 0}, PromptTokens: 4},
		{Shape: []int64{2}, Data: []float32{1, 1}, PromptTokens: 4},
	}
	scores, tokens, e := plan.scores(answers)
	if e != nil {
		t.Fatal(e)
	}
	if scores[0] != 1 || scores[1] != float64(float32(1/1.4142135623730951)) || !slices.Equal(tokens, []int{9, 9}) {
		t.Fatalf("scores %v tokens %v", scores, tokens)
	}
	if c := cosine([]float32{0, 0}, []float32{1, 0}); c != 0 {
		t.Fatalf("cosine with a zero vector: %v", c)
	}
}

// TestRerankOrderAndTopN ports vLLM's rerank answer: sorted by relevance, top_n
// kept when 0 < top_n < documents, every pair counted in usage, indices those of
// the documents as sent.
func TestRerankOrderAndTopN(t *testing.T) {
	scores := []float64{0.1, 0.9, 0.5, 0.9}
	tokens := []int{3, 4, 5, 6}
	docs := []string{"a", "b", "c", "d"}
	for _, c := range []struct {
		topN int64
		want []int
	}{{0, []int{1, 3, 2, 0}}, {2, []int{1, 3}}, {4, []int{1, 3, 2, 0}}, {9, []int{1, 3, 2, 0}}} {
		resp := rerankResponseOf("score-x", "m", &scorePlan{docs: docs, topN: c.topN}, scores, tokens)
		var got []int
		for _, r := range resp.Results {
			got = append(got, r.Index)
			if *r.Document.Text != docs[r.Index] || r.RelevanceScore != scores[r.Index] {
				t.Fatalf("result %+v", r)
			}
		}
		if !slices.Equal(got, c.want) || resp.Usage.PromptTokens != 18 || resp.Usage.TotalTokens != 18 {
			t.Errorf("top_n %d: order %v usage %+v, want %v and 18", c.topN, got, resp.Usage, c.want)
		}
	}
	b, _ := json.Marshal(rerankResponseOf("score-x", "m", &scorePlan{docs: docs[:1]}, scores[:1], tokens[:1]))
	want := `{"id":"score-x","model":"m","usage":{"prompt_tokens":3,"total_tokens":3},"results":[{"index":0,"document":{"text":"a","multi_modal":null},"relevance_score":0.1}]}`
	if string(b) != want {
		t.Fatalf("rerank JSON\n got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(scoreResponseOf("score-x", 7, "m", []float64{0.5}, []int{3}))
	want = `{"id":"score-x","object":"list","created":7,"model":"m","data":[{"index":0,"object":"score","score":0.5}],"usage":{"prompt_tokens":3,"total_tokens":3,"completion_tokens":0,"prompt_tokens_details":null}}`
	if string(b) != want {
		t.Fatalf("score JSON\n got %s\nwant %s", b, want)
	}
}

// TestScoreKinds: which scoring vLLM's ServingScores would run for the engines'
// tasks, and the num_labels == 1 rule.
func TestScoreKinds(t *testing.T) {
	one := scoreTestAPI(t, 10, `{"id2label": {"0": "LABEL_0"}}`)
	two := scoreTestAPI(t, 10, `{"id2label": {"0": "neg", "1": "pos"}}`)
	for _, c := range []struct {
		a     *API
		tasks []string
		ok    bool
		kind  scoreKind
	}{
		{one, []string{"embed", "token_embed"}, true, scoreKind{task: "embed"}},
		{one, []string{"classify", "token_classify"}, true, scoreKind{cross: true, task: "classify"}},
		{one, []string{"encode", "classify", "score"}, true, scoreKind{cross: true, task: "score"}},
		{two, []string{"classify"}, false, scoreKind{}},
		{one, []string{"generate"}, false, scoreKind{}},
	} {
		k, ok := c.a.scoreKindOf(c.tasks)
		if ok != c.ok || k != c.kind {
			t.Errorf("%v: %+v %v", c.tasks, k, ok)
		}
	}
	w := httptest.NewRecorder()
	writeNotFound(w)
	if w.Code != 404 || strings.TrimSpace(w.Body.String()) != `{"detail":"Not Found"}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestTypeSplit ports vLLM's compress_token_type_ids cases.
func TestTypeSplit(t *testing.T) {
	for _, c := range []struct {
		in   []uint8
		want int
		ok   bool
	}{{[]uint8{0, 0, 1, 1}, 2, true}, {[]uint8{0, 0}, 2, true}, {[]uint8{1, 1}, 0, true}, {nil, 0, true},
		{[]uint8{0, 1, 0}, 0, false}, {[]uint8{0, 2}, 0, false}} {
		if got, ok := typeSplit(c.in); got != c.want || ok != c.ok {
			t.Errorf("%v: %d %v", c.in, got, ok)
		}
	}
}

// TestClassifyAnswer: label is id2label of the first largest prob (LABEL_i without
// a config's names), probs and num_classes as the engine sent, usage summed.
func TestClassifyAnswer(t *testing.T) {
	a := scoreTestAPI(t, 10, `{"id2label": {"0": "Default", "1": "Spoiled"}}`)
	answers := []pooled{{Shape: []int64{2}, Data: []float32{0.25, 0.75}, PromptTokens: 5}, {Shape: []int64{2}, Data: []float32{0.5, 0.5}, PromptTokens: 2}}
	resp := a.classifyResponseOf("classify-x", answers)
	if *resp.Data[0].Label != "Spoiled" || *resp.Data[1].Label != "Default" || resp.Data[1].NumClasses != 2 || resp.Usage.TotalTokens != 7 {
		t.Fatalf("%+v", resp)
	}
	b, _ := json.Marshal(resp.Data[0])
	if string(b) != `{"index":0,"label":"Spoiled","probs":[0.25,0.75],"num_classes":2}` {
		t.Fatalf("%s", b)
	}
	bare := scoreTestAPI(t, 10, `{}`)
	if l := bare.classifyResponseOf("x", answers[:1]).Data[0].Label; l == nil || *l != "LABEL_1" {
		t.Fatalf("default label %v", l)
	}
	job, e := a.classifyJobOf(httptest.NewRequest("POST", "/classify", nil), &classifyRequest{Input: json.RawMessage(`["ab", [5, 6]]`)})
	if e == nil {
		t.Fatalf("mixed list accepted: %+v", job)
	}
	job, e = a.classifyJobOf(httptest.NewRequest("POST", "/classify", nil), &classifyRequest{Input: json.RawMessage(`[[5, 6], [7]]`), UseActivation: new(bool)})
	if e != nil || len(job.Prompts) != 2 || job.Params.Task != "classify" || job.Params.Activation != (wire.OptBool{Valid: true}) {
		t.Fatalf("%+v %v", job, e)
	}
	if _, e := a.classifyJobOf(httptest.NewRequest("POST", "/classify", nil), &classifyRequest{Input: json.RawMessage(`[]`)}); e == nil || e.Message != "You must pass at least one prompt" {
		t.Fatalf("empty list: %v", e)
	}
}

// TestPairPromptForms: --chat-template renders the pair as the messages query and
// document (with instruction folded into chat_template_kwargs); use_sep_token false
// joins the texts; vLLM's reserved kwargs are refused.
func TestPairPromptForms(t *testing.T) {
	a := scoreTestAPI(t, 100, "")
	tmpl, err := chattemplate.Parse("{% for m in messages %}{{ m.role[0] }}:{{ m.content }} {% endfor %}{{ instruction }}")
	if err != nil {
		t.Fatal(err)
	}
	a.text.ScoreTemplate = tmpl
	req := &scoreRequest{Instruction: new(string), ChatTemplateKwargs: json.RawMessage(`{"x": 1}`)}
	*req.Instruction = "be fair"
	kw, e := scoreKwargs(req)
	if e != nil || kw["instruction"] != "be fair" {
		t.Fatalf("kwargs %v %v", kw, e)
	}
	plan := &scorePlan{kind: scoreKind{cross: true, task: "classify"}, kwargs: kw}
	if e := a.crossPrompts(context.Background(), plan, []string{"ab"}, []string{"cd"}, &tokParams{maxLen: 100}, 0, 0); e != nil {
		t.Fatal(e)
	}
	if want := a.text.Tokenizer.Encode("q:ab d:cd be fair", true); !slices.Equal(plan.job.Prompts[0], want) {
		t.Fatalf("template pair %v, want %v", plan.job.Prompts[0], want)
	}
	if _, e := scoreKwargs(&scoreRequest{ChatTemplateKwargs: json.RawMessage(`{"tools": [], "tokenize": true}`)}); e == nil ||
		e.Message != "chat_template_kwargs contains reserved keys that conflict with fixed scorer arguments: {'tools', 'tokenize'}" {
		t.Fatalf("reserved: %v", e)
	}
	joined := scoreTestAPI(t, 100, `{"use_sep_token": false}`)
	plan = &scorePlan{kind: plan.kind}
	if e := joined.crossPrompts(context.Background(), plan, []string{"ab"}, []string{"cd"}, &tokParams{maxLen: 100}, 0, 0); e != nil {
		t.Fatal(e)
	}
	if want := joined.text.Tokenizer.Encode("abcd", true); !slices.Equal(plan.job.Prompts[0], want) {
		t.Fatalf("joined pair %v, want %v", plan.job.Prompts[0], want)
	}
}

// TestClassifyChat ports vLLM's classification chat request: the conversation through
// the chat template, no generation prompt and no special tokens by default, the
// continue_final_message / add_generation_prompt conflict refused.
func TestClassifyChat(t *testing.T) {
	a := scoreTestAPI(t, 50, "")
	tmpl, err := chattemplate.Parse("{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}?{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	a.text.Template = tmpl
	msgs := json.RawMessage(`[{"role": "user", "content": "ab"}, {"role": "assistant", "content": "cd"}]`)
	r := httptest.NewRequest("POST", "/classify", nil)
	job, e := a.classifyJobOf(r, &classifyRequest{Messages: msgs})
	if e != nil || len(job.Prompts) != 1 || !slices.Equal(job.Prompts[0], a.text.Tokenizer.Encode("abcd", false)) {
		t.Fatalf("%v %v", job.Prompts, e)
	}
	yes := true
	job, e = a.classifyJobOf(r, &classifyRequest{Messages: msgs, AddGenerationPrompt: &yes, AddSpecialTokens: &yes})
	if e != nil || !slices.Equal(job.Prompts[0], a.text.Tokenizer.Encode("abcd?", true)) {
		t.Fatalf("%v %v", job.Prompts, e)
	}
	_, e = a.classifyJobOf(r, &classifyRequest{Messages: msgs, AddGenerationPrompt: &yes, ContinueFinalMessage: &yes})
	if e == nil || e.Message != "Cannot set both `continue_final_message` and `add_generation_prompt` to True." {
		t.Fatalf("%v", e)
	}
}
