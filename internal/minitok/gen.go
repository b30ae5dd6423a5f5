//go:build ignore

// gen writes tokenizer.json: a byte-level BPE tokenizer (GPT-2 style pre-tokenizer
// and decoder) whose merges build every word of corpus (text.go) as one token with
// its leading space. Run: go generate ./internal/minitok
package main

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	src, err := os.ReadFile("text.go")
	if err != nil {
		panic(err)
	}
	body := string(src)
	body = body[strings.Index(body, "`")+1 : strings.LastIndex(body, "`")]
	words := map[string]bool{}
	for _, w := range regexp.MustCompile(`[a-z]+`).FindAllString(strings.ToLower(body), -1) {
		words[w] = true
	}
	list := make([]string, 0, len(words))
	for w := range words {
		list = append(list, w)
	}
	sort.Strings(list)

	// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256+n.
	var byteChar [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae && b <= 0xff {
			byteChar[b] = rune(b)
		} else {
			byteChar[b] = rune(256 + n)
			n++
		}
	}
	vocab := map[string]int{}
	order := []string{}
	add := func(tok string) {
		if _, ok := vocab[tok]; !ok {
			vocab[tok] = len(order)
			order = append(order, tok)
		}
	}
	for b := 0; b < 256; b++ {
		add(string(byteChar[b]))
	}
	// Merges only ever extend a token that starts with Ġ (a space), one letter at a
	// time, so every word with its leading space merges into one token whatever
	// other words exist.
	var merges []string
	seen := map[string]bool{}
	space := string(byteChar[' '])
	var all []string
	for _, w := range list {
		all = append(all, w, strings.ToUpper(w[:1])+w[1:])
	}
	for _, w := range all {
		cur := space
		for _, c := range w {
			next := cur + string(c)
			m := cur + " " + string(c)
			if !seen[m] {
				seen[m] = true
				merges = append(merges, m)
			}
			add(next)
			cur = next
		}
	}
	special := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	var added []map[string]any
	for _, s := range special {
		added = append(added, map[string]any{"id": len(order), "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
		add(s)
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": byteLevel, "post_processor": byteLevel, "decoder": byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	out, err := json.MarshalIndent(tj, "", " ")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("tokenizer.json", append(out, '\n'), 0o644); err != nil {
		panic(err)
	}
	cfg := map[string]any{
		"bos_token": nil, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "add_bos_token": false,
		"chat_template": "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}" +
			"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}",
	}
	out, _ = json.MarshalIndent(cfg, "", " ")
	if err := os.WriteFile("tokenizer_config.json", append(out, '\n'), 0o644); err != nil {
		panic(err)
	}
}
