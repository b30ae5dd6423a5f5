package chattemplate

import (
	"fmt"
	"strings"
	"testing"
)

// tenTurns is a system prompt and 10 user/assistant turns of ~200 bytes each.
func tenTurns() []map[string]any {
	msgs := []map[string]any{{"role": "system", "content": "You are a helpful assistant. Answer briefly."}}
	for i := 0; i < 10; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("Turn %d: %s", i, strings.Repeat("lorem ipsum ", 16))})
	}
	return msgs
}

func BenchmarkRender(b *testing.B) {
	msgs := tenTurns()
	for _, tm := range allTemplates(b) {
		tpl, err := Parse(tm.src)
		if err != nil {
			b.Fatal(err)
		}
		in := Input{Messages: msgs, SpecialTokens: tm.special, AddGenerationPrompt: true, Now: pinnedNow}
		if _, err := tpl.Render(in); err != nil {
			b.Fatalf("%s: %v", tm.name, err)
		}
		b.Run(tm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tpl.Render(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, tm := range allTemplates(b) {
		b.Run(tm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(tm.src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
