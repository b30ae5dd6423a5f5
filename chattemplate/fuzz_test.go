package chattemplate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRender parses fuzzed templates and renders them with fuzzed message
// content: neither may panic or run unbounded (a small budget is set).
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
		_, _ = tpl.Render(Input{Messages: msgs, Tools: []any{map[string]any{"type": "function"}}, AddGenerationPrompt: true,
			SpecialTokens: handSpecial, Kwargs: map[string]any{"enable_thinking": false}, Now: pinnedNow,
			MaxSteps: 1 << 16, MaxOutputBytes: 1 << 16})
	})
}
