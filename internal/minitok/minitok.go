// Package minitok is the small tokenizer built into the binary, so the embedded
// default (switchyard serve with built-in mock engines and no --tokenizer) shows
// text: a byte-level BPE whose vocabulary holds every word of our own English corpus
// (text.go) as one token, and a ChatML-style chat template. gen.go writes the files:
//
//go:generate go run gen.go
package minitok

import (
	"embed"
	"encoding/json"
	"strings"
)

// FS holds tokenizer.json and tokenizer_config.json.
//
//go:embed tokenizer.json tokenizer_config.json
var FS embed.FS

// Name is the embedded model's name.
const Name = "switchyard-mini"

// Words returns the ids of the whole-word tokens (lower case, with their leading
// space), the tokens the mock engines draw readable answers from, the same words
// capitalised (for a sentence's first word), and the id of "." for ending
// sentences.
func Words() (words, capitals []int64, period int64) {
	b, err := FS.ReadFile("tokenizer.json")
	if err != nil {
		panic(err)
	}
	var tj struct {
		Model struct {
			Vocab map[string]int64 `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		panic(err)
	}
	seen := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(corpus)) {
		w = strings.Trim(w, ".,?!")
		id, ok := tj.Model.Vocab["Ġ"+w]
		capital, okc := tj.Model.Vocab["Ġ"+strings.ToUpper(w[:1])+w[1:]]
		if ok && okc && !seen[w] {
			seen[w] = true
			words = append(words, id)
			capitals = append(capitals, capital)
		}
	}
	return words, capitals, tj.Model.Vocab["."]
}
