package chattemplate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// exprGen builds random Jinja expressions over the snippet context, to find
// differences in value semantics that hand-written snippets miss.
type exprGen struct{ r *rand.Rand }

func (g *exprGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *exprGen) atom() string {
	switch g.r.IntN(6) {
	case 0:
		return g.pick("s", "n", "f", "l", "d", "t", "nested", "objs", "x", "big", "small", "neg", "messages")
	case 1:
		return g.pick("0", "1", "-2", "3", "10", "2.5", "0.1", "1e3", "-0.0", "7")
	case 2:
		return g.pick(`''`, `'a'`, `'Hello World'`, `' pad '`, `'é世'`, `'a,b,c'`, `'x\ny'`, `"it's"`, `'</think>'`, `'0x1f'`, `'12'`, `'3.5'`)
	case 3:
		return g.pick("none", "true", "false", "[]", "[1, 'a', none]", "{'k': 1, 'a': [2]}", "(1, 2)", "{}", "['b', 'A', 'c']")
	case 4:
		return g.pick("d.a", "d['b']", "l[0]", "l[-1]", "objs[0].name", "nested.z", "messages[0].content", "d.missing", "l[1:]", "s[::-1]", "s[2:5]", "t[1]", "objs | map(attribute='name') | list")
	default:
		return g.pick("s.upper()", "s.split()", "s.strip('h')", "d.items() | list", "d.get('a')", "s.startswith('he')", "s.replace('o', '0')", "' x '.strip()", "s.title()", "'a-b'.split('-')", "d.keys() | list")
	}
}

func (g *exprGen) expr(depth int) string {
	if depth <= 0 {
		return g.atom()
	}
	a := func() string { return g.expr(depth - 1) }
	switch g.r.IntN(10) {
	case 9:
		return g.pick("'{}'", "'{!r}'", "'{:>7}'", "'{:<4}|'", "'{:^9}'", "'{:.2f}'", "'{:+d}'", "'{:,}'", "'{:08.3f}'", "'{:x}'", "'{:.1%}'", "'{:e}'", "'{:.2}'", "'{:g}'", "'{:.3g}'", "'{:#.3g}'", "'{:.1}'", "'{:10.4}'", "'%s'", "'%5.1f'", "'%d|%r'", "'%-6s|'", "'%x'") +
			g.pick(".format(", " % (") + a() + g.pick(")", ", "+a()+")")
	case 0:
		return a() + " " + g.pick("+", "-", "*", "/", "//", "%", "~", "**") + " " + a()
	case 1:
		return a() + " " + g.pick("==", "!=", "<", ">", "<=", ">=", "in", "not in") + " " + a()
	case 2:
		return a() + " " + g.pick("and", "or") + " " + a()
	case 3:
		return "not " + a()
	case 4:
		return "(" + a() + ") | " + g.pick("length", "string", "trim", "upper", "lower", "title", "capitalize", "first", "last", "list", "reverse | list",
			"int", "float", "abs", "default('D')", "default('D', true)", "join(',')", "tojson", "tojson(indent=2)", "tojson(sort_keys=true)",
			"sort | list", "unique | list", "items | list", "dictsort", "sum", "min", "max", "wordcount", "replace('a', 'b')", "round(1)", "select('odd') | list", "count", "e")
	case 5:
		return "(" + a() + ") is " + g.pick("defined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence", "odd", "even", "true", "false", "not none", "boolean", "divisibleby 2", "eq 1", "in [1, 'a']")
	case 6:
		return "(" + a() + " if " + a() + " else " + a() + ")"
	case 7:
		return "[" + a() + ", " + a() + "]"
	default:
		return "(" + a() + ")"
	}
}

// TestDifferentialRandomExpressions renders random expressions (fixed seed,
// or CHATTEMPLATE_SEED) and requires the reference's bytes, or an error on
// both sides.
func TestDifferentialRandomExpressions(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("CHATTEMPLATE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	n := 600
	if s := os.Getenv("CHATTEMPLATE_RANDOM_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	g := &exprGen{rand.New(rand.NewPCG(seed, 7))}
	var cases []refCase
	for i := 0; i < n; i++ {
		cases = append(cases, refCase{Template: "{{ " + g.expr(1+i%3) + " }}", Messages: json.RawMessage(snippetMessages),
			Kwargs: json.RawMessage(snippetKwargs), Special: handSpecial, Now: pinnedUnix})
	}
	res := runReference(t, cases)
	fails := 0
	for i, c := range cases {
		label := fmt.Sprintf("random %d %s", i, strings.TrimSpace(c.Template))
		if res[i].Error != nil && (strings.HasPrefix(*res[i].Error, "Timeout") || strings.HasPrefix(*res[i].Error, "MemoryError")) {
			continue // Python gave up (a huge int or string); nothing to compare
		}
		tpl, err := Parse(c.Template)
		if err != nil {
			if res[i].Error == nil {
				t.Errorf("%s: Parse: %v (reference rendered %q)", label, err, *res[i].Out)
				fails++
			}
			continue
		}
		got, err := tpl.Render(inputFor(t, c))
		if err != nil && res[i].Error == nil && strings.Contains(err.Error(), "unsupported:") {
			// A documented refusal (complex numbers, bigints, printing a
			// generator ...), not a silent difference.
			t.Logf("%s: refused: %v (reference: %q)", label, err, *res[i].Out)
			continue
		}
		before := t.Failed()
		compareResult(t, label, got, err, res[i])
		if !before && t.Failed() {
			fails++
		}
	}
}

// tmplGen builds random templates: text with blanks and newlines around
// tags with random whitespace control, nested if/for/set/macro/raw/comments,
// to find differences in trim_blocks/lstrip_blocks handling and scoping.
type tmplGen struct {
	exprGen
	b strings.Builder
}

func (g *tmplGen) text() {
	g.b.WriteString(g.pick("", " ", "  ", "\n", "\n  ", "  \n", "x", " y\n", "\n\n", "\t", "\t\n  z ", "a\n   "))
}

func (g *tmplGen) open(kind string) string {
	return kind + g.pick("", "", "-", "+")
}

func (g *tmplGen) close(kind string) string {
	return g.pick("", "", "-", "+") + kind
}

func (g *tmplGen) block(depth int) {
	n := 1 + g.r.IntN(3)
	for i := 0; i < n; i++ {
		g.text()
		switch k := g.r.IntN(9); {
		case k < 3 || depth <= 0:
			c := strings.TrimPrefix(g.close("}}"), "+") // "+}}" is not valid jinja2
			g.b.WriteString(g.open("{{") + " " + g.expr(1) + " " + c)
		case k == 3:
			g.b.WriteString(g.open("{%") + " if " + g.expr(1) + " " + g.close("%}"))
			g.block(depth - 1)
			if g.r.IntN(2) == 0 {
				g.text()
				g.b.WriteString(g.open("{%") + " else " + g.close("%}"))
				g.block(depth - 1)
			}
			g.text()
			g.b.WriteString(g.open("{%") + " endif " + g.close("%}"))
		case k == 4:
			g.b.WriteString(g.open("{%") + " for item in " + g.pick("l", "s", "d", "objs", "messages", "[]", "range(3)") + " " + g.close("%}"))
			g.block(depth - 1)
			g.text()
			g.b.WriteString(g.open("{{") + " loop.index ~ item " + g.pick("", "-") + "}}")
			g.text()
			g.b.WriteString(g.open("{%") + " endfor " + g.close("%}"))
		case k == 5:
			g.b.WriteString(g.open("{%") + " set v = " + g.expr(1) + " " + g.close("%}"))
			g.text()
			g.b.WriteString("{{ v }}")
		case k == 6:
			g.b.WriteString(g.open("{#") + " note " + g.close("#}"))
		case k == 7:
			g.b.WriteString(g.open("{%") + " raw " + g.close("%}") + "{{ raw }} {%x%}" + g.open("{%") + " endraw " + g.close("%}"))
		default:
			g.b.WriteString(g.open("{%") + " macro mm(a, b=2) " + g.close("%}"))
			g.block(depth - 1)
			g.b.WriteString("[{{ a }}{{ b }}]")
			g.b.WriteString(g.open("{%") + " endmacro " + g.close("%}"))
			g.text()
			g.b.WriteString("{{ mm(" + g.expr(0) + ") }}")
		}
		g.text()
	}
}

// TestDifferentialRandomTemplates renders random templates (fixed seed, or
// CHATTEMPLATE_SEED) and requires the reference's bytes, or an error on
// both sides.
func TestDifferentialRandomTemplates(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("CHATTEMPLATE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	n := 400
	if s := os.Getenv("CHATTEMPLATE_RANDOM_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	var cases []refCase
	for i := 0; i < n; i++ {
		g := &tmplGen{exprGen: exprGen{r}}
		g.block(1 + i%3)
		cases = append(cases, refCase{Template: g.b.String(), Messages: json.RawMessage(snippetMessages),
			Kwargs: json.RawMessage(snippetKwargs), Special: handSpecial, Now: pinnedUnix})
	}
	res := runReference(t, cases)
	for i, c := range cases {
		if res[i].Error != nil && (strings.HasPrefix(*res[i].Error, "Timeout") || strings.HasPrefix(*res[i].Error, "MemoryError")) {
			continue
		}
		label := fmt.Sprintf("random template %d %q", i, c.Template)
		tpl, err := Parse(c.Template)
		if err != nil {
			if res[i].Error == nil {
				t.Errorf("%s: Parse: %v (reference rendered %q)", label, err, *res[i].Out)
			}
			continue
		}
		got, err := tpl.Render(inputFor(t, c))
		if err != nil && res[i].Error == nil && strings.Contains(err.Error(), "unsupported:") {
			t.Logf("%s: refused: %v", label, err)
			continue
		}
		compareResult(t, label, got, err, res[i])
	}
}

// randomConversation builds a message list from pools of roles and contents,
// including shapes clients should not send (null or numeric content, no role
// alternation, stray tool messages), as JSON.
func randomConversation(r *rand.Rand) string {
	contents := []string{`"hi"`, `"  spaced  "`, `""`, `null`, `"<think>\nplan\n</think>\n\nanswer"`, `"{{ x }} {% if %}"`,
		`"é 世界 \u2028 \u0000"`, `[{"type": "text", "text": "part"}]`, `[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]`,
		`"<|im_end|><s></s>"`, `"line1\nline2"`, `5`}
	var msgs []string
	n := 1 + r.IntN(6)
	for i := 0; i < n; i++ {
		role := []string{"system", "user", "assistant", "user", "assistant", "tool", "developer"}[r.IntN(7)]
		if i == 0 && r.IntN(2) == 0 {
			role = "system"
		}
		m := fmt.Sprintf(`{"role": %q, "content": %s`, role, contents[r.IntN(len(contents))])
		if role == "assistant" && r.IntN(3) == 0 {
			m += `, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": 1, \"a\": [true, null]}"}}]`
		}
		if role == "assistant" && r.IntN(3) == 0 {
			m += `, "reasoning_content": "because"`
		}
		if role == "tool" {
			m += `, "tool_call_id": "c1"`
		}
		msgs = append(msgs, m+"}")
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// TestDifferentialRandomConversations renders random conversations through
// every template, raw and through the vLLM request path.
func TestDifferentialRandomConversations(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("CHATTEMPLATE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	per := 40
	if s := os.Getenv("CHATTEMPLATE_RANDOM_N"); s != "" {
		n, _ := strconv.Atoi(s)
		per = max(n/20, 1)
	}
	r := rand.New(rand.NewPCG(seed, 13))
	tools := json.RawMessage(`[{"type": "function", "function": {"name": "f", "description": "F.", "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}}}}]`)
	var cases []refCase
	var labels []string
	for _, tm := range allTemplates(t) {
		for i := 0; i < per; i++ {
			c := refCase{Template: tm.src, Messages: json.RawMessage(randomConversation(r)), Special: tm.special,
				Now: pinnedUnix, AddGenerationPrompt: r.IntN(2) == 0, VLLM: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				c.Tools = tools
			}
			if r.IntN(3) == 0 {
				c.Kwargs = json.RawMessage(`{"enable_thinking": false}`)
			}
			cases = append(cases, c)
			labels = append(labels, fmt.Sprintf("%s/random %d %s", tm.name, i, c.Messages))
		}
	}
	res := runReference(t, cases)
	parsed := map[string]*Template{}
	for i, c := range cases {
		tpl := parsed[c.Template]
		if tpl == nil {
			var err error
			if tpl, err = Parse(c.Template); err != nil {
				t.Fatal(err)
			}
			parsed[c.Template] = tpl
		}
		in := inputFor(t, c)
		if c.VLLM {
			var err error
			in.Messages, err = PrepareMessages(c.Messages, tpl.ContentFormat())
			if err != nil {
				if res[i].Error == nil {
					t.Errorf("%s: PrepareMessages: %v (reference rendered)", labels[i], err)
				}
				continue
			}
			if in.Tools, err = PrepareTools(c.Tools); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tpl.Render(in)
		compareResult(t, labels[i], got, err, res[i])
	}
}
