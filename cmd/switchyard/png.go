//go:build benchplot

package main

import "github.com/switchyard-llm/switchyard/internal/bench/chart"

// writePNG draws bench's chart. Only binaries built with -tags benchplot carry it:
// the plotting library and its fonts would be a fifth of the serve binary.
var writePNG = chart.WritePNG
