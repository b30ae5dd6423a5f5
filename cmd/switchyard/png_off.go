//go:build !benchplot

package main

import (
	"errors"

	"github.com/switchyard-llm/switchyard/internal/bench"
)

// writePNG refuses: the plotting library and its fonts are left out of the default
// binary, where they would be a fifth of its size for one bench flag.
func writePNG(string, *bench.Report) error {
	return errors.New("--png needs a binary built with charts: go build -tags benchplot ./cmd/switchyard")
}
