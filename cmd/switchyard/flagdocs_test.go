package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// docs/flags.md is what the flag definitions say, so it cannot drift from them.
func TestFlagDocsUpToDate(t *testing.T) {
	// Through the command go generate runs, so that it stays registered.
	var b strings.Builder
	cmd := rootCommand()
	cmd.Writer, cmd.ErrWriter = &b, &strings.Builder{}
	if err := cmd.Run(context.Background(), []string{"switchyard", "docs", "flags"}); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatalf("%v; generate it with: go generate ./cmd/switchyard", err)
	}
	if string(have) != b.String() {
		t.Fatal("docs/flags.md differs from the flag definitions; regenerate it with: go generate ./cmd/switchyard " +
			"(or go run ./cmd/switchyard docs flags --output docs/flags.md)")
	}
	for _, want := range []string{"## switchyard serve", "## switchyard mock-engine", "## switchyard registry", "## switchyard bench",
		"| `--http-write-timeout` | `SWITCHYARD_HTTP_WRITE_TIMEOUT` | `30s` |", "| `--tokenizer`, `--model` |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
}
