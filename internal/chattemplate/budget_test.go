package chattemplate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// budgetAttacks are templates that built hundreds of MB or ran for minutes
// before every value was charged: each must stop at the default budget.
var budgetAttacks = []struct{ name, src string }{
	{"repeat then list", `{% set x = "a"*60000000 %}{{ x|list|length }}`},
	{"list of a string", `{{ ("a"*1000000)|list|length }}`},
	{"for over a string", `{% for c in "a"*1000000 %}{% endfor %}`},
	{"percent width", `{{ "%099999999d" % 1 }}`},
	{"percent precision", `{{ "%.99999999f" % 1.5 }}`},
	{"percent many fields", `{{ ("%9999999s"*100) % ((1,)*100) }}`},
	{"percent mapping reuse", `{% set d = {"a": "x"*1000000} %}{{ ("%(a)s"*100) % d }}`},
	{"format filter width", `{{ "%099999999d"|format(1) }}`},
	{"str.format width", `{{ '{:>99999999}'.format('x') }}`},
	{"str.format precision", `{{ '{:.99999999f}'.format(1.5) }}`},
	{"str.format reuse", `{{ ('{0}'*100).format("x"*1000000) }}`},
	{"replace grow", `{{ ("a"*1000000).replace("a", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb") }}`},
	{"replace empty", `{{ ("a"*1000000)|replace("", "xxxxxxxx") }}`},
	{"replace doubling", `{% set ns = namespace(s="a"*1000) %}{% for i in range(100) %}{% set ns.s = ns.s.replace("a", "aa") %}{% endfor %}{{ ns.s|length }}`},
	{"join filter", `{{ (["a"*100000]*1000)|join }}`},
	{"join method", `{{ "x".join(["a"*100000]*1000) }}`},
	{"list repeat", `{{ (("a"*100)|list * 100000)|length }}`},
	{"range too big", `{{ range(10**9)|length }}`},
	{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`},
	{"tilde doubling", `{% set ns = namespace(s="a") %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`},
	{"plus doubling", `{% set ns = namespace(s="a") %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}`},
	{"list plus doubling", `{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}`},
	{"macro fan-out", `{% macro f(n) %}{{ f(n+1) }}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`},
	{"macro loop recursion", `{% macro f(n) %}{% for i in range(100000) %}{{ f(n+1) }}{% endfor %}{% endmacro %}{{ f(0) }}`},
	{"length of huge", `{{ ("a"*100000000)|length }}`},
	{"print shared nesting", `{% set l = ["a"*100000]*100 %}{% set m = [l]*100 %}{{ m }}`},
	{"string shared nesting", `{% set l = ["a"*100000]*100 %}{% set m = [l]*100 %}{{ m|string|length }}`},
	{"tojson shared nesting", `{% set l = ["a"*100000]*100 %}{% set m = [l]*100 %}{{ m|tojson|length }}`},
	{"tojson indent", `{{ [[[[[[[[1]]]]]]]]|tojson(indent=10000000) }}`},
	{"indent filter", `{{ ("a\n"*100000)|indent(1000) }}`},
	{"indent width", `{{ "x\ny"|indent(99999999, true) }}`},
	{"split", `{{ ("a "*1000000).split()|length }}`},
	{"sum of lists", `{{ ([["a"]*1000]*1000)|sum(start=[])|length }}`},
	{"sort in a loop", `{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l|sort|length }}{% endfor %}`},
	{"scan in a loop", `{% set s = "a"*1000000 %}{% for i in range(100000) %}{% if "b" in s %}{% endif %}{% endfor %}`},
	{"compare in a loop", `{% set s = "a"*1000000 %}{% set t = "a"*1000000 %}{% for i in range(100000) %}{% if s == t %}{% endif %}{% endfor %}`},
	{"slice in a loop", `{% set s = "a"*1000000 %}{% for i in range(100000) %}{% set t = s[1:] %}{% endfor %}`},
	{"output in a loop", `{% set s = "a"*1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}`},
	{"zfill", `{{ "1".zfill(99999999) }}`},
	{"wordcount", `{{ ("a "*1000000)|wordcount }}`},
	{"compare shared nesting", `{% set l = ["a"]*100000 %}{% set m = [l]*100 %}{% set m2 = [m]*100 %}{{ m2 == [m]*100 }}`},
	{"sort shared nesting", `{% set l = ["a"]*100000 %}{% set m = [l]*100 %}{% set m2 = [m]*100 %}{{ m2|sort|length }}`},
	{"count shared nesting", `{% set l = ["a"]*100000 %}{% set m = [l]*100 %}{% set m2 = [m]*100 %}{{ m2.count(m) }}`},
}

// TestBudgetAttacks: every attack fails with ErrBudget (range and the macro
// fan-out with Python's sandbox errors) and returns fast, at the default
// budget.
func TestBudgetAttacks(t *testing.T) {
	for _, a := range budgetAttacks {
		t.Run(a.name, func(t *testing.T) {
			tpl, err := Parse(a.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tpl.Render(Input{Messages: []map[string]any{{"role": "user", "content": "hi"}}})
			el := time.Since(start)
			switch a.name {
			case "range too big":
				if err == nil || !strings.Contains(err.Error(), "MAX_RANGE") {
					t.Fatalf("err = %v, want the sandbox's range error", err)
				}
			case "macro fan-out": // the depth limit is met first
				if err == nil || !strings.Contains(err.Error(), "recursion") {
					t.Fatalf("err = %v, want the recursion limit", err)
				}
			default:
				if !errors.Is(err, ErrBudget) {
					t.Fatalf("err = %v, want ErrBudget", err)
				}
			}
			if el > 2*time.Second { // 0.13 s at most on a quiet machine, 0.8 s with -race on a loaded one
				t.Errorf("stopped after %v", el)
			}
			t.Logf("%v: %v", el, err)
		})
	}
}

// TestBudgetRealTemplates: real templates render long conversations (few
// big messages, many tiny ones) well within the default budget; the figures
// logged are what the defaults are sized from.
func TestBudgetRealTemplates(t *testing.T) {
	for _, conv := range []struct {
		name string
		msgs []map[string]any
	}{{"1 MB in 1 KB messages", bigConversation(1<<20, 1000)}, {"64 KB in 10-byte messages", bigConversation(64<<10, 10)}} {
		for _, tm := range allTemplates(t) {
			tpl, err := Parse(tm.src)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Messages: conv.msgs, SpecialTokens: tm.special, AddGenerationPrompt: true, Now: pinnedNow}
			size := inputSize(&in)
			_, left, err := tpl.render(context.Background(), in)
			var re *RaisedError
			if err != nil && !errors.As(err, &re) {
				t.Errorf("%s, %s: %v", conv.name, tm.name, err)
				continue
			}
			usedB, usedS := left.maxBytes-left.bytes, left.maxSteps-left.steps
			t.Logf("%s, %s: %.1f bytes and %.2f steps per input byte (%.0f%% and %.0f%% of the budget)", conv.name, tm.name,
				float64(usedB)/float64(size), float64(usedS)/float64(size),
				100*float64(usedB)/float64(left.maxBytes), 100*float64(usedS)/float64(left.maxSteps))
			if usedB > left.maxBytes/2 || usedS > left.maxSteps/2 {
				t.Errorf("%s, %s: used more than half the budget", conv.name, tm.name)
			}
		}
	}
}

// TestRenderContextCancel: a render within its budget but long stops soon
// after its context is cancelled, and a done context renders nothing.
func TestRenderContextCancel(t *testing.T) {
	slow, err := Parse(`{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		err     error
		stopped time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := slow.RenderContext(ctx, Input{MaxSteps: 1 << 50, MaxBytes: 1 << 50, MaxOutputBytes: 1 << 40})
		done <- result{err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	res := testwait.Recv(t, done, "the cancelled render")
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.err)
	}
	if lag := res.stopped.Sub(cancelled); lag > 500*time.Millisecond {
		t.Errorf("stopped %v after the cancel", lag)
	}
	t.Logf("stopped %v after the cancel", res.stopped.Sub(cancelled))
	if _, err := slow.RenderContext(ctx, Input{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: err = %v", err)
	}
}

// TestBudgetExplicit: explicit bounds are honoured as given.
func TestBudgetExplicit(t *testing.T) {
	tpl, _ := Parse(`{{ "a"*1000 }}`)
	if _, err := tpl.Render(Input{MaxBytes: 500}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("MaxBytes 500: err = %v", err)
	}
	if out, err := tpl.Render(Input{MaxBytes: 4000}); err != nil || len(out) != 1000 {
		t.Fatalf("MaxBytes 4000: %d bytes, err = %v", len(out), err)
	}
	loop, _ := Parse(`{% for i in range(1000) %}{% endfor %}`)
	if _, err := loop.Render(Input{MaxSteps: 500}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "MaxSteps") {
		t.Fatalf("MaxSteps 500: err = %v", err)
	}
}

// TestSpecDigits: only the numbers inside format fields count, so a format
// with digits in its text is not charged for them.
func TestSpecDigits(t *testing.T) {
	for f, want := range map[string]int64{
		"id 123456789012: %s":   0,
		"%099999999d":           99999999,
		"%.5f and %(a)10s %%7":  15,
		"{:>99999999} 2024 {0}": 99999999,
		"{:0>5}":                5,
	} {
		if got := specDigits(f); got != want {
			t.Errorf("specDigits(%q) = %d, want %d", f, got, want)
		}
	}
}
