package mockengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/wire"
)

// A Script makes the engine answer chosen prompts with chosen tokens, so an
// end-to-end test can have a "model" write a tool call or a reasoning block
// through the real frontend: a rule whose trigger token ids occur (as one run)
// in a request's prompt answers it with the rule's tokens, TokensPerStep per
// step, then finishes. Requests no rule matches keep the usual answers.
//
// The file form (LoadScript, the --script and --mock-engine-script flags):
//
//	{"rules": [
//	  {"trigger": [35, 1, 990], "tokens": [151657, 198, 90], "finish": "stop"}
//	]}
//
// finish "stop" (the default) ends with the request's EOS token after the
// tokens, as a model does (a final output whose text is empty), or with
// finish_reason stop on the last token when the request has no EOS or
// ignores it; "length" finishes with length on the last token. max_tokens,
// stop_token_ids and max_model_len still apply, in vLLM's order.
type Script struct {
	Rules []ScriptRule `json:"rules"`
}

// ScriptRule is one trigger and its answer.
type ScriptRule struct {
	Trigger []int64 `json:"trigger"`
	Tokens  []int64 `json:"tokens"`
	Finish  string  `json:"finish,omitempty"` // "stop" (default) or "length"
}

// Script limits: a test script is small; these only keep a wrong file from
// costing memory or time per request.
const (
	maxScriptBytes  = 16 << 20
	maxScriptRules  = 4096
	maxScriptTokens = 1 << 20 // per rule, trigger or answer
)

// LoadScript reads and checks a script file.
func LoadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mockengine: script: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxScriptBytes+1))
	if err != nil {
		return nil, fmt.Errorf("mockengine: script %s: %w", path, err)
	}
	if len(b) > maxScriptBytes {
		return nil, fmt.Errorf("mockengine: script %s is larger than %d bytes", path, maxScriptBytes)
	}
	s, err := ParseScript(b)
	if err != nil {
		return nil, fmt.Errorf("mockengine: script %s: %w", path, err)
	}
	return s, nil
}

// ParseScript decodes and checks a script.
func ParseScript(b []byte) (*Script, error) {
	var s Script
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, s.Validate()
}

// Validate names the first rule at fault.
func (s *Script) Validate() error {
	if len(s.Rules) == 0 {
		return errors.New("no rules")
	}
	if len(s.Rules) > maxScriptRules {
		return fmt.Errorf("%d rules, at most %d", len(s.Rules), maxScriptRules)
	}
	for i, r := range s.Rules {
		switch {
		case len(r.Trigger) == 0:
			return fmt.Errorf("rule %d: empty trigger", i)
		case len(r.Tokens) == 0:
			return fmt.Errorf("rule %d: no tokens", i)
		case len(r.Trigger) > maxScriptTokens || len(r.Tokens) > maxScriptTokens:
			return fmt.Errorf("rule %d: more than %d tokens", i, maxScriptTokens)
		case r.Finish != "" && r.Finish != "stop" && r.Finish != "length":
			return fmt.Errorf("rule %d: finish must be stop or length, got %q", i, r.Finish)
		}
		if slices.ContainsFunc(r.Tokens, func(t int64) bool { return t < 0 }) {
			return fmt.Errorf("rule %d: negative token id", i)
		}
	}
	return nil
}

// match is the first rule whose trigger occurs in prompt, or nil.
func (s *Script) match(prompt []int64) *ScriptRule {
	if s == nil {
		return nil
	}
	for i := range s.Rules {
		if containsRun(prompt, s.Rules[i].Trigger) {
			return &s.Rules[i]
		}
	}
	return nil
}

// containsRun reports whether sub occurs in s as consecutive elements.
func containsRun(s, sub []int64) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i] == sub[0] && slices.Equal(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// scripted is a matched request's answer: tokens to emit in order, and how
// the last one finishes when nothing else stopped the request first.
type scripted struct {
	tokens []int64
	length bool
}

// scriptFor builds q's answer from the rule that matches its prompt.
func scriptFor(s *Script, prompt []int64, q *request) *scripted {
	r := s.match(prompt)
	if r == nil {
		return nil
	}
	sc := &scripted{tokens: r.Tokens, length: r.Finish == "length"}
	if !sc.length && q.eos.Valid && !q.ignoreEOS {
		sc.tokens = append(slices.Clip(r.Tokens), q.eos.Value)
	}
	return sc
}

// defaultScript is the script DefaultConfig carries: the serve command sets
// it for its built-in engines, whose configs start from DefaultConfig.
var defaultScript atomic.Pointer[Script]

// SetDefaultScript makes DefaultConfig carry s (nil: none). Call it before
// the engines start.
func SetDefaultScript(s *Script) { defaultScript.Store(s) }

// end finishes a scripted request whose tokens are all out (the last one, or
// the EOS after them): stop or length as the rule says. min_tokens does not
// hold a script back.
func (sc *scripted) end(generated int, o *wire.EngineCoreOutput) bool {
	if sc == nil || generated < len(sc.tokens) {
		return false
	}
	o.FinishReason = wire.FinishStop
	if sc.length {
		o.FinishReason = wire.FinishLength
	}
	return true
}
