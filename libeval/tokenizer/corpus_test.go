package tokenizer

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var models = []string{"llama3_1", "qwen3", "gemma3", "llama2", "deepseek_v3", "gptoss"}

func modelsDir() string {
	if d := os.Getenv("SWITCHYARD_MODELS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "switchyard", "models")
}

// shortCorpus reads the string literals of tokenizer's hostileCorpus and
// loneSurrogateJSON from its test source, so the corpus is never copied:
// every literal of hostileCorpus's first []string, then the JSON-only
// entries decoded as the differential test decodes them (U+FFFD).
func shortCorpus(t *testing.T) []string {
	path := filepath.Join("..", "..", "tokenizer", "corpus_test.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name == "hostileCorpus" {
				texts = append(texts, firstLiterals(t, d)...)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if v, ok := s.(*ast.ValueSpec); ok && v.Names[0].Name == "loneSurrogateJSON" {
					for _, js := range stringLits(t, v.Values[0].(*ast.CompositeLit)) {
						var s string
						if err := json.Unmarshal([]byte(js), &s); err != nil {
							t.Fatal(err)
						}
						texts = append(texts, s)
					}
				}
			}
		}
	}
	if len(texts) < 60 {
		t.Fatalf("found %d corpus texts in %s; its shape changed", len(texts), path)
	}
	return texts
}

func firstLiterals(t *testing.T, fn *ast.FuncDecl) []string {
	var out []string
	ast.Inspect(fn, func(n ast.Node) bool {
		if cl, ok := n.(*ast.CompositeLit); ok && out == nil {
			out = stringLits(t, cl)
			return false
		}
		return out == nil
	})
	return out
}

func stringLits(t *testing.T, cl *ast.CompositeLit) []string {
	var out []string
	for _, e := range cl.Elts {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}
