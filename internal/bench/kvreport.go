package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// KVPolicy is one routing policy's figures on a kv workload (Report.KV, keyed by the
// policy's name).
type KVPolicy struct {
	Policy   string  `json:"policy"`
	Requests int64   `json:"requests"` // finished
	Failed   int64   `json:"failed"`
	Seconds  float64 `json:"seconds"` // first submission to last answer
	// HitRatio is the engines' own prefix-cache hits over their queries, in
	// prompt tokens, summed over the engines: what the routing achieved.
	HitRatio       float64 `json:"hit_ratio"`
	QueryTokens    int64   `json:"query_tokens"`
	HitTokens      int64   `json:"hit_tokens"`
	OracleHitRatio float64 `json:"oracle_hit_ratio"` // the workload's, repeated for each policy
	TTFTP50MS      float64 `json:"ttft_p50_ms"`
	TTFTP90MS      float64 `json:"ttft_p90_ms"`
	TTFT           Summary `json:"ttft"`
	// RequestsPerEngine is the requests each rank prefilled, by the engines'
	// counts; MaxOverMean is the busiest rank's count over the mean.
	RequestsPerEngine []int64 `json:"requests_per_engine"`
	MaxOverMean       float64 `json:"max_over_mean"`
	// PredictedHitRatio is the share of routed prompt tokens switchyard's index
	// expected cached on the rank it chose (kv, prefix): next to HitRatio, how well
	// the index tracked the engines' caches. Decisions are its rank choices by
	// reason; IndexClears how often it dropped a rank's index (gaps, restarts; not
	// the clear of an empty index as each engine first joins).
	PredictedHitRatio float64          `json:"predicted_hit_ratio,omitempty"`
	Decisions         map[string]int64 `json:"route_decisions,omitempty"`
	IndexClears       int64            `json:"index_clears,omitempty"`
	// TimerLagP99MS is how late a 1 ms timer woke at p99 during the replay: the
	// machine's own noise in every TTFT (kvmetrics.go).
	TimerLagP99MS float64 `json:"timer_lag_p99_ms"`
	// AnswerMismatches counts answers unlike the workload's (mockengine.TokensFor):
	// the next turn's prompt then no longer continues what the engine cached, and
	// the hit ratio is lower than the routing deserves. 0 in a sound run.
	AnswerMismatches int64 `json:"answer_mismatches,omitempty"`
}

// KVWorkloadFigures describe the workload every policy of a kv run replayed.
type KVWorkloadFigures struct {
	Requests         int     `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	OracleHitRatio   float64 `json:"oracle_hit_ratio"`
	WorkingSetBlocks int     `json:"working_set_blocks"`
	BlocksPerEngine  int     `json:"blocks_per_engine"` // each engine's cache capacity
}

// maxOverMean is the largest count over the mean count; 0 when nothing was counted.
func maxOverMean(counts []int64) float64 {
	var sum, top int64
	for _, c := range counts {
		sum += c
		top = max(top, c)
	}
	if sum == 0 {
		return 0
	}
	return float64(top) / (float64(sum) / float64(len(counts)))
}

// ratio is a/b, 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// KVPolicies are r's policies in the order the run took them.
func KVPolicies(r *Report) []*KVPolicy {
	var out []*KVPolicy
	if r.Config.KV != nil {
		for _, name := range r.Config.KV.Policies {
			if p := r.KV[name]; p != nil {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 { // a report read back without its configuration's list
		for _, name := range slices.Sorted(maps.Keys(r.KV)) {
			out = append(out, r.KV[name])
		}
	}
	return out
}

// kvTargets are the cache-aware routing targets: kv against the oracle and against
// least-loaded in the same run, on the scenario they are stated for (4 engines whose
// caches each hold a quarter of the working set).
func kvTargets(r *Report) []Target {
	c := r.Config.KV
	kv := r.KV["kv"]
	if c == nil || kv == nil || r.Config.Engines != 4 || c.CacheShare != DefaultCacheShare {
		return nil
	}
	ts := []Target{
		{Name: "kv hit ratio vs the oracle", Want: ">= 0.8x", Got: ratio(kv.HitRatio, kv.OracleHitRatio), Unit: "x",
			Met:  kv.HitRatio >= 0.8*kv.OracleHitRatio,
			Note: fmt.Sprintf("kv %s, oracle %s (unbounded cache)", FormatFigure(kv.HitRatio), FormatFigure(kv.OracleHitRatio))},
		{Name: "kv busiest engine vs the mean", Want: "<= 1.5x", Got: kv.MaxOverMean, Unit: "x", Met: kv.MaxOverMean <= 1.5,
			Note: fmt.Sprintf("requests per engine %v", kv.RequestsPerEngine)},
	}
	if ll := r.KV["least-loaded"]; ll != nil {
		ts = append(ts,
			Target{Name: "kv hit ratio vs least-loaded", Want: ">= 2x", Got: ratio(kv.HitRatio, ll.HitRatio), Unit: "x",
				Met:  kv.HitRatio >= 2*ll.HitRatio,
				Note: fmt.Sprintf("kv %s, least-loaded %s", FormatFigure(kv.HitRatio), FormatFigure(ll.HitRatio))},
			Target{Name: "kv TTFT p50 vs least-loaded", Want: "<= 0.5x", Got: ratio(kv.TTFTP50MS, ll.TTFTP50MS), Unit: "x",
				Met:  kv.TTFTP50MS <= 0.5*ll.TTFTP50MS,
				Note: fmt.Sprintf("kv %s ms, least-loaded %s ms", FormatFigure(kv.TTFTP50MS), FormatFigure(ll.TTFTP50MS))})
	}
	return ts
}

// printKV writes a kv run: the workload, then one column per policy.
func printKV(w io.Writer, r *Report) error {
	c := r.Config
	k := c.KV
	wl := k.Workload
	fmt.Fprintf(w, "kv routing, workload %s: %s; %d engines, step %s, %d tokens/step, prefill %s per uncached token; seed %d\n",
		wl.Kind, describeWorkload(wl), c.Engines, c.StepTime, c.TokensPerStep, k.PrefillPerToken, wl.Seed)
	if f := r.KVWorkload; f != nil {
		fmt.Fprintf(w, "%d requests, %d prompt tokens; oracle hit ratio %s (an unbounded cache shared by every engine: an upper bound); "+
			"working set %d blocks of %d tokens, each engine's cache %d blocks (%s of it)\n",
			f.Requests, f.PromptTokens, FormatFigure(f.OracleHitRatio), f.WorkingSetBlocks, wl.BlockSize, f.BlocksPerEngine, fmt.Sprintf("%g", k.CacheShare))
	}
	if r.Runs > 1 {
		fmt.Fprintf(w, "%d runs: the figures below are the last run's, the targets every run's\n", r.Runs)
	}
	fmt.Fprintln(w)
	ps := KVPolicies(r)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\t")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t", p.Policy)
	}
	fmt.Fprintln(tw)
	rows := []struct {
		name string
		get  func(*KVPolicy) string
	}{
		{"hit ratio (engines' counts)", func(p *KVPolicy) string { return FormatFigure(p.HitRatio) }},
		{"oracle hit ratio", func(p *KVPolicy) string { return FormatFigure(p.OracleHitRatio) }},
		{"hit ratio / oracle", func(p *KVPolicy) string { return FormatFigure(ratio(p.HitRatio, p.OracleHitRatio)) }},
		{"TTFT p50 (ms)", func(p *KVPolicy) string { return FormatFigure(p.TTFTP50MS) }},
		{"TTFT p90 (ms)", func(p *KVPolicy) string { return FormatFigure(p.TTFTP90MS) }},
		{"requests per engine", func(p *KVPolicy) string { return fmt.Sprint(p.RequestsPerEngine) }},
		{"busiest engine / mean", func(p *KVPolicy) string { return FormatFigure(p.MaxOverMean) }},
		{"predicted hit ratio (switchyard's index)", func(p *KVPolicy) string { return orDash(p.PredictedHitRatio, FormatFigure) }},
		{"route decisions", func(p *KVPolicy) string { return fmtDecisions(p.Decisions) }},
		{"index clears (gaps, restarts)", func(p *KVPolicy) string { return fmt.Sprint(p.IndexClears) }},
		{"requests finished", func(p *KVPolicy) string { return fmt.Sprint(p.Requests) }},
		{"failed", func(p *KVPolicy) string { return fmt.Sprint(p.Failed) }},
		{"answers unlike the workload", func(p *KVPolicy) string { return fmt.Sprint(p.AnswerMismatches) }},
		{"seconds", func(p *KVPolicy) string { return FormatFigure(p.Seconds) }},
		{"1 ms timer lag p99 (ms)", func(p *KVPolicy) string { return FormatFigure(p.TimerLagP99MS) }},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t", row.name)
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t", row.get(p))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printWarnings(w, r.Warnings)
	printTargetsUnder(w, "targets (kv against the oracle and least-loaded of this run)", r.Targets)
	return nil
}

// describeWorkload says what the workload is made of, in one line.
func describeWorkload(wl KVWorkloadConfig) string {
	if wl.Kind == WorkloadSharedPrefix {
		return fmt.Sprintf("%d requests over %d prefixes of %d tokens, %d-token suffixes, %d-token answers, %s req/s",
			wl.Conversations, wl.Prefixes, wl.PrefixTokens, wl.FirstTokens, wl.AnswerTokens, FormatRate(wl.Rate))
	}
	return fmt.Sprintf("%d conversations x %d turns, %d system prompts of %d tokens, first message %d, "+
		"then %d-token messages, %d-token answers, think %s, %s conversations/s",
		wl.Conversations, wl.Turns, wl.Prefixes, wl.PrefixTokens, wl.FirstTokens, wl.UserTokens, wl.AnswerTokens,
		wl.Think, FormatRate(wl.Rate))
}

// orDash formats v, or "-" for a figure the policy does not have.
func orDash(v float64, f func(float64) string) string {
	if v == 0 {
		return "-"
	}
	return f(v)
}

// fmtDecisions writes rank choices as reason=count, by reason.
func fmtDecisions(d map[string]int64) string {
	if len(d) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, d[k]))
	}
	return strings.Join(parts, " ")
}
