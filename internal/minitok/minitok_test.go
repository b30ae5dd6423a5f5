package minitok_test

import (
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/minitok"
	"github.com/switchyard-llm/switchyard/internal/model"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// The embedded tokenizer loads, every corpus word is one token, and text round-trips.
func TestEmbeddedTokenizer(t *testing.T) {
	m, err := model.LoadFS(minitok.FS, minitok.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(m.TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.EOSTokenIDs) != 1 || m.ChatTemplate == "" || m.VocabSize < 1500 {
		t.Fatalf("eos %v, template %d bytes, vocab %d", m.EOSTokenIDs, len(m.ChatTemplate), m.VocabSize)
	}
	for _, s := range []string{"Hello there, how are you today?", "ünïcödé 世界 👋\n\ttabs", " the quick brown fox"} {
		if got := tok.Decode(tok.Encode(s, false), false); got != s {
			t.Errorf("round trip %q -> %q", s, got)
		}
	}
	if ids := tok.Encode(" the quick brown fox", false); len(ids) != 4 {
		t.Errorf("whole words are not one token each: %v", ids)
	}
	words, capitals, period := minitok.Words()
	if len(words) < 200 || len(capitals) != len(words) || tok.Decode([]int64{period}, false) != "." {
		t.Fatalf("%d words, %d capitals, period %d", len(words), len(capitals), period)
	}
	for i, id := range words {
		w, c := tok.Decode([]int64{id}, false), tok.Decode([]int64{capitals[i]}, false)
		if !strings.HasPrefix(w, " ") || strings.Contains(w[1:], " ") || !strings.EqualFold(w, c) || w == c {
			t.Fatalf("word %d: %q / %q", i, w, c)
		}
	}
}
