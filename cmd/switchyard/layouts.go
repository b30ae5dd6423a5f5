package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/wire"
)

// vllmLayoutScript writes a layout file from the vLLM installed where it runs.
//
//go:embed vllm_layout.py
var vllmLayoutScript string

// vllmLayoutScriptCommand prints the script, so an engine host needs no checkout:
// `switchyard vllm-layout-script | python3 - > layout.json`.
func vllmLayoutScriptCommand() *cli.Command {
	return &cli.Command{
		Name:  "vllm-layout-script",
		Usage: "print the Python script that writes a layout file from the vLLM installed on an engine host",
		Description: "Run on an engine host with vLLM's Python: switchyard vllm-layout-script | python3 - > layout.json\n" +
			"then: switchyard serve --vllm-layout layout.json. The script imports vLLM's own engine-core\n" +
			"classes (no model, no GPU) and writes their fields, defaults and version.",
		Action: func(_ context.Context, cmd *cli.Command) error {
			_, err := fmt.Fprint(cmd.Root().Writer, vllmLayoutScript)
			return err
		},
	}
}

// loadLayout reads --vllm-layout's value: a layout file's path, or a built-in name.
// isFile tells which.
func loadLayout(v string) (l *wire.Layout, isFile bool, err error) {
	if l := wire.BuiltinLayout(v); l != nil && !strings.ContainsAny(v, `/\`) {
		if _, err := os.Stat(v); err != nil { // a file of that name wins
			return l, false, nil
		}
	}
	data, err := os.ReadFile(v)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, fmt.Errorf("--vllm-layout %q: neither a file nor a built-in layout (built-in: %s)", v, strings.Join(wire.LayoutNames(), ", "))
		}
		return nil, false, fmt.Errorf("--vllm-layout: %w", err)
	}
	l, err = wire.ParseLayout(data, v)
	if err != nil {
		return nil, false, fmt.Errorf("--vllm-layout: %w", err)
	}
	return l, true, nil
}

// layoutSet builds the engines' LayoutSet from --vllm-layout values: files are
// tried before the built-ins, in the order given; at most one built-in name, which
// is forced on every engine that reports no version (or one nothing places).
func layoutSet(values []string) (*wire.LayoutSet, error) {
	if len(values) == 0 {
		return nil, nil
	}
	set := &wire.LayoutSet{}
	for _, v := range values {
		l, isFile, err := loadLayout(v)
		if err != nil {
			return nil, err
		}
		if isFile {
			set.Files = append(set.Files, l)
			continue
		}
		if set.Force != nil {
			return nil, fmt.Errorf("--vllm-layout: two built-in layouts forced (%s, %s); force at most one", set.Force.Name, l.Name)
		}
		set.Force = l
	}
	return set, nil
}

// mockLayouts reads --mock-engine-layouts: comma-separated names or files, one per
// mock engine rank (repeated when there are more ranks).
func mockLayouts(v string) ([]*wire.Layout, error) {
	var out []*wire.Layout
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		l, _, err := loadLayout(part)
		if err != nil {
			return nil, fmt.Errorf("--mock-engine-layouts: %w", err)
		}
		out = append(out, l)
	}
	return out, nil
}
