package chattemplate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRender parses fuzzed templates and renders them with fuzzed message
// content: neither may panic or run unbounded (a small budget is set: a
// render the budget does not stop within seconds is a failure).
func FuzzRender(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(string(b), "hello {{ x }}")
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "snippets.jinja")); err == nil {
		for _, s := range strings.Split(string(b), "\n===\n") {
			f.Add(s, "{% raw %}")
		}
	}
	for _, a := range budgetAttacks {
		f.Add(a.src, "x")
	}
	f.Add(`{{ messages[0].content | tojson }}{{ messages[0]['content'].split('a')[::-1] }}`, "a\u2028b")
	f.Fuzz(func(t *testing.T, src, content string) {
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_ = tpl.ContentFormat()
		msgs := []map[string]any{
			{"role": "system", "content": content},
			{"role": "user", "content": []any{map[string]any{"type": "text", "text": content}}},
			{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"function": map[string]any{"name": content, "arguments": map[string]any{"a": int64(1)}}}}},
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = tpl.RenderContext(ctx, Input{Messages: msgs, Tools: []any{map[string]any{"type": "function"}}, AddGenerationPrompt: true,
			SpecialTokens: handSpecial, Kwargs: map[string]any{"enable_thinking": false}, Now: pinnedNow,
			MaxSteps: 1 << 16, MaxBytes: 1 << 20, MaxOutputBytes: 1 << 16})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the budget did not stop the render within 5 s")
		}
	})
}
