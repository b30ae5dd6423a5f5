// Package chart draws a bench report as a PNG: latency percentile curves of
// switchyard against its baseline, latency against throughput for a sweep, and
// TTFT, hit ratio and balance per policy for a kv run.
//
// It is its own package so the plotting library and its fonts stay out of the
// serve binary: cmd/switchyard links it only when built with -tags benchplot.
//
//	rep, _ := bench.ReadReport("run.json")
//	err := chart.WritePNG("run.png", rep)
package chart
