package chattemplate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func TestConcurrentRender(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "templates", "features.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Messages: tenTurns(), SpecialTokens: handSpecial, Now: pinnedNow, AddGenerationPrompt: true}
	want, err := tpl.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got, err := tpl.Render(in); err != nil || got != want {
					t.Errorf("concurrent render differs: %v", err)
					return
				}
			}
		})
	}
	testwait.Wait(t, &wg, "the concurrent renders")
}

func TestParseRefusesNamingTheFeature(t *testing.T) {
	for src, name := range map[string]string{
		`{% include "x" %}`:                          "include",
		`{{ x | center(9) }}`:                        "center",
		`{% if x is foo %}{% endif %}`:               "foo",
		`{% for x in y recursive %}{% endfor %}`:     "recursive",
		`{% call m() %}{% endcall %}`:                "call",
		`{{ f(*args) }}`:                             "*args",
		`{% extends "base" %}`:                       "extends",
		`{% macro m() %}{% endmacro %}{{ m() | x }}`: "x",
	} {
		_, err := Parse(src)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Parse(%q) = %v, want an error naming %q", src, err, name)
		}
	}
}

func TestRaiseExceptionIsRaisedError(t *testing.T) {
	tpl, err := Parse(`{{ raise_exception("roles must alternate") }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(Input{})
	var re *RaisedError
	if !errors.As(err, &re) || re.Message != "roles must alternate" || err.Error() != "roles must alternate" {
		t.Fatalf("err = %#v", err)
	}
}

func TestFromTokenizerConfig(t *testing.T) {
	cfg := `{"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
		"chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T{{ tools | length }}"}]}`
	tmpls, special, err := FromTokenizerConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if special["bos_token"] != "<s>" || special["eos_token"] != "</s>" || len(special) != 2 {
		t.Fatalf("special = %v", special)
	}
	def := tmpls["default"]
	delete(tmpls, "default")
	if tpl, _ := Select(def, tmpls, "", true); tpl != tmpls["tool_use"] {
		t.Fatal("tools given: want tool_use")
	}
	if tpl, _ := Select(def, tmpls, "", false); tpl != def {
		t.Fatal("no tools: want default")
	}
	if _, err := Select(def, tmpls, "nope", false); err == nil {
		t.Fatal("unknown name selected")
	}
	if _, err := Select(nil, nil, "", false); !errors.Is(err, ErrNoChatTemplate) {
		t.Fatalf("no template: %v", err)
	}
	out, err := def.Render(Input{SpecialTokens: special, Now: func() time.Time { return time.Time{} }})
	if err != nil || out != "D<s>" {
		t.Fatalf("render = %q, %v", out, err)
	}
}

func TestLoadDirPrefersChatTemplateJinja(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer_config.json", `{"eos_token": "E", "chat_template": "old"}`)
	write("chat_template.jinja", "new{{ eos_token }}\n")
	write("additional_chat_templates/rag.jinja", "rag")
	def, named, special, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := def.Render(Input{SpecialTokens: special})
	if out != "newE" {
		t.Fatalf("default renders %q, want chat_template.jinja's", out)
	}
	if named["rag"] == nil {
		t.Fatal("additional_chat_templates/rag.jinja not loaded")
	}
}
