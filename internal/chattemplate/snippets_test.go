package chattemplate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snippetKwargs is the context every snippet renders with.
const snippetKwargs = `{"s": "hello World", "n": 3, "f": 2.5, "big": 12345678901234, "small": 1e-7, "neg": -4,
 "l": [1, 2, 3, 1], "d": {"b": 2, "a": 1, "c": "x"}, "t": [1, "two"],
 "nested": {"z": [1, {"y": null, "x": true}], "a": "é\n", "n": 1.0},
 "objs": [{"name": "al", "age": 30}, {"name": "bo", "age": 0}, {"name": "cy"}]}`

const snippetMessages = `[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]`

// TestDifferentialSnippets renders the small templates of
// testdata/snippets.jinja (one per "===" block) and compares each with the
// reference: these pin down value printing, filters, tests, operators and
// whitespace control one feature at a time.
func TestDifferentialSnippets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "snippets.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	srcs := strings.Split(string(b), "\n===\n")
	var cases []refCase
	for _, src := range srcs {
		cases = append(cases, refCase{Template: src, Messages: json.RawMessage(snippetMessages),
			Kwargs: json.RawMessage(snippetKwargs), Special: handSpecial, Now: pinnedUnix, AddGenerationPrompt: true})
	}
	res := runReference(t, cases)
	for i, c := range cases {
		label := fmt.Sprintf("snippet %d %.40q", i, srcs[i])
		tpl, err := Parse(c.Template)
		if err != nil {
			if res[i].Error != nil {
				continue
			}
			t.Errorf("%s: Parse: %v", label, err)
			continue
		}
		got, err := tpl.Render(inputFor(t, c))
		if strings.HasPrefix(c.Template, "{# expect-refusal #}") {
			// Python prints something no one can reproduce (a memory
			// address, a bigint): we must refuse, naming it.
			if err == nil || !strings.Contains(err.Error(), "unsupported") {
				t.Errorf("%s: want a refusal, got %q, %v (reference: %v)", label, got, err, res[i].Out)
			}
			continue
		}
		compareResult(t, label, got, err, res[i])
	}
}
