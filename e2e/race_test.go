//go:build race

package e2e

// Under -race the binary is built with the race detector too, so a data race in the
// daemon fails the test through its exit code (66) rather than going unseen.
func init() { buildFlags = append(buildFlags, "-race") }
