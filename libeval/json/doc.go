// Package json compares JSON decoders on completions request bodies:
// encoding/json, github.com/goccy/go-json, github.com/bytedance/sonic, and
// switchyard's own streaming decoder reached through server.ParseCompletion.
// A test checks each library's result against ours on bodies where the
// semantics differ (field-name case, depth, duplicates, trailing bytes); the
// benchmarks measure the bodies server's BenchmarkParseCompletion uses.
package json
