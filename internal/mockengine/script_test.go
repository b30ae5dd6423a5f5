package mockengine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// scriptReq is add with a prompt of our own.
func scriptReq(id string, prompt []int64, maxTokens int64, mut func(*wire.SamplingParams)) *wire.EngineCoreRequest {
	r := add(id, maxTokens, mut)
	r.PromptTokenIDs = prompt
	return r
}

func TestSchedulerScript(t *testing.T) {
	const eos = 99
	script := &Script{Rules: []ScriptRule{
		{Trigger: []int64{7, 8}, Tokens: []int64{500, 501, 502, 503, 504}},
		{Trigger: []int64{9}, Tokens: []int64{600, 601}, Finish: "length"},
		{Trigger: []int64{7}, Tokens: []int64{700}}, // shadowed by the first rule for 7, 8
	}}
	withEOS := func(p *wire.SamplingParams) { p.EOSTokenID = wire.SomeInt(eos) }
	tests := []struct {
		name   string
		req    *wire.EngineCoreRequest
		want   []int64
		finish wire.FinishReason
		steps  int
	}{
		{"trigger inside the prompt, EOS after", scriptReq("a", []int64{1, 7, 8, 2}, 50, withEOS), []int64{500, 501, 502, 503, 504, eos}, wire.FinishStop, 2},
		{"no EOS: stop on the last token", scriptReq("b", []int64{7, 8}, 50, nil), []int64{500, 501, 502, 503, 504}, wire.FinishStop, 2},
		{"ignore_eos", scriptReq("c", []int64{7, 8}, 50, func(p *wire.SamplingParams) { withEOS(p); p.IgnoreEOS = true }), []int64{500, 501, 502, 503, 504}, wire.FinishStop, 2},
		{"length rule", scriptReq("d", []int64{9}, 50, withEOS), []int64{600, 601}, wire.FinishLength, 1},
		{"first matching rule wins", scriptReq("e", []int64{7, 1, 7, 8}, 50, nil), []int64{500, 501, 502, 503, 504}, wire.FinishStop, 2},
		{"split trigger does not match", scriptReq("f", []int64{7, 1, 8}, 50, nil), []int64{700}, wire.FinishStop, 1},
		{"max_tokens cuts the script", scriptReq("g", []int64{7, 8}, 2, withEOS), []int64{500, 501}, wire.FinishLength, 1},
		{"stop token inside the script", scriptReq("h", []int64{7, 8}, 50, func(p *wire.SamplingParams) { p.StopTokenIDs = []int64{502} }), []int64{500, 501, 502}, wire.FinishStop, 1},
		{"min_tokens does not extend it", scriptReq("i", []int64{9}, 50, func(p *wire.SamplingParams) { p.MinTokens = 10 }), []int64{600, 601}, wire.FinishLength, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(3, 0, 8)
			s.Script = script
			if err := s.Add(tt.req); err != nil {
				t.Fatal(err)
			}
			steps := 0
			var toks []int64
			var fin wire.FinishReason
			for !s.Idle() && steps < 100 {
				steps++
				for _, o := range s.Step(nil) {
					if len(o.NewTokenIDs) > 3 {
						t.Errorf("%d tokens in one step", len(o.NewTokenIDs))
					}
					toks = append(toks, o.NewTokenIDs...)
					fin = o.FinishReason
				}
			}
			if !slices.Equal(toks, tt.want) || fin != tt.finish || steps != tt.steps {
				t.Fatalf("got %v %v in %d steps, want %v %v in %d", toks, fin, steps, tt.want, tt.finish, tt.steps)
			}
		})
	}
	// A prompt no rule matches keeps the deterministic answer.
	s := NewScheduler(1, 0, 8)
	s.Script = script
	s.Add(add("plain", 4, nil))
	if toks, _, _ := run(t, s); !slices.Equal(toks["plain"], stream("plain", 4)) {
		t.Fatalf("unscripted %v", toks["plain"])
	}
}

func TestParseScript(t *testing.T) {
	s, err := ParseScript([]byte(`{"rules": [{"trigger": [1, 2], "tokens": [3], "finish": "length"}]}`))
	if err != nil || len(s.Rules) != 1 || s.Rules[0].Finish != "length" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{
		`{"rules": []}`,
		`{"rules": [{"trigger": [], "tokens": [1]}]}`,
		`{"rules": [{"trigger": [1], "tokens": []}]}`,
		`{"rules": [{"trigger": [1], "tokens": [1], "finish": "eos"}]}`,
		`{"rules": [{"trigger": [1], "tokens": [-1]}]}`,
		`{"rules": [{"trigger": [1], "tokens": ["a"]}]}`,
		`[1, 2]`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(`{"rules": [{"trigger": [5], "tokens": [6, 7]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(p)
	if err != nil || !slices.Equal(s.Rules[0].Tokens, []int64{6, 7}) {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", maxScriptBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	// DefaultConfig carries the process-wide script the serve command sets.
	SetDefaultScript(s)
	defer SetDefaultScript(nil)
	if DefaultConfig().Script != s {
		t.Error("DefaultConfig does not carry the default script")
	}
}
