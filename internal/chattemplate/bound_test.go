package chattemplate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// bigConversation is about size bytes of alternating user/assistant messages.
func bigConversation(size, per int) []map[string]any {
	var msgs []map[string]any
	body := strings.Repeat("x", per)
	for i := 0; len(msgs)*per < size; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("%d %s", i, body)})
	}
	return msgs
}

// TestRenderLinearInInput renders a 1 MB message list through every template:
// each must finish fast (the work is linear in the input), rendering or
// stopping with ErrBudget, never running away.
func TestRenderLinearInInput(t *testing.T) {
	msgs := bigConversation(1<<20, 1000)
	for _, tm := range allTemplates(t) {
		tpl, err := Parse(tm.src)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := tpl.Render(Input{Messages: msgs, SpecialTokens: tm.special, AddGenerationPrompt: true, Now: pinnedNow})
		el := time.Since(start)
		if err != nil && !errors.Is(err, ErrBudget) {
			var re *RaisedError
			if !errors.As(err, &re) {
				t.Errorf("%s: %v", tm.name, err)
			}
		}
		if el > 5*time.Second {
			t.Errorf("%s: 1 MB conversation took %v", tm.name, el)
		}
		t.Logf("%s: %d messages -> %d bytes in %v (err=%v)", tm.name, len(msgs), len(out), el, err)
	}
}

// TestRenderBudget: a template that is quadratic in its input (string
// accumulation over all messages, as deepseek_v3's system prompt loop) stops
// at the budget instead of running for minutes; an output bomb stops too.
func TestRenderBudget(t *testing.T) {
	quad, err := Parse(`{% set ns = namespace(s='') %}{% for m in messages %}{% for n in messages %}{% set ns.s = ns.s + n.content %}{% endfor %}{% endfor %}{{ ns.s | length }}`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = quad.Render(Input{Messages: bigConversation(1<<20, 1000)})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("quadratic render: err = %v, want ErrBudget", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("budget hit after %v", el)
	}
	bomb, _ := Parse(`{% for i in range(100000) %}{% for j in range(100000) %}{{ messages[0].content }}{% endfor %}{% endfor %}`)
	_, err = bomb.Render(Input{Messages: bigConversation(10, 10), MaxOutputBytes: 1 << 20})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("output bomb: err = %v, want ErrBudget", err)
	}
	rec, _ := Parse(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	if _, err := rec.Render(Input{}); err == nil {
		t.Fatal("infinite macro recursion rendered")
	}
}
