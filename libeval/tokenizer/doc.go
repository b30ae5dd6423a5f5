// Package tokenizer re-runs the tokenizer library evaluation: each Go
// candidate loads the six models' tokenizer.json files that tokenizer's
// differential test uses and encodes the short texts of that test's corpus
// (read from tokenizer/corpus_test.go in place); the ids are compared with
// tokenizer's, which its own differential test holds byte-equal to Hugging
// Face's Rust tokenizers. Load failures and panics are recovered and counted.
package tokenizer
