// Package tokenizer encodes and decodes text exactly as Hugging Face `tokenizers` does for a
// tokenizer.json, for the BPE tokenizers the models served by vLLM use (byte-level BPE and
// SentencePiece-style BPE with byte fallback). Components it does not implement are refused at
// Load, by name, rather than approximated.
package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded tokenizer.json. It is immutable after Load and safe for concurrent use.
type Tokenizer struct {
	model    *bpe
	norm     normalizer
	steps    []preStep
	addedRaw *addedMatcher // added tokens with normalized=false, matched on the input
	addedNrm *addedMatcher // added tokens with normalized=true, matched on normalized text

	prefixIDs, suffixIDs []int64       // post-processor, with add_special_tokens
	post                 *postTemplate // the post-processor's templates, for pairs and truncation

	idToTok   []string // "" where no token has the id
	hasID     []bool
	special   []bool // added token with special=true
	skippable []bool // decode with skipSpecialTokens drops it: its string is a special token's
	addedToID map[string]int64
	vocabSize int

	dec decoderPlan

	maxTokenBytes int        // see MaxTokenBytes
	boundForm     *norm.Form // the normalizer when it is one Unicode form (MaxTokenBytesOf)
	boundFormName string
}

// maxVocab bounds token ids at Load.
const maxVocab = 1 << 24

// LoadFile reads and loads a tokenizer.json file.
func LoadFile(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(b)
}

// Load parses a tokenizer.json. Any component or option this package does not implement is
// an error naming it.
func Load(tokenizerJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: %v", err)
	}
	var m modelJSON
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: model: %v", err)
	}
	if m.Type == "" && m.Vocab != nil && len(m.Merges) > 0 {
		m.Type = "BPE" // tokenizers infers the model from its fields when "type" is absent
	}
	if m.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer: model %q is not supported", m.Type)
	}
	model, err := newBPE(&m)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{model: model, addedRaw: newAddedMatcher(), addedNrm: newAddedMatcher(), addedToID: map[string]int64{}}

	nc, err := parseComponent(f.Normalizer, "normalizer")
	if err != nil {
		return nil, err
	}
	if t.norm, err = buildNormalizer(nc); err != nil {
		return nil, err
	}
	pc, err := parseComponent(f.PreTokenizer, "pre_tokenizer")
	if err != nil {
		return nil, err
	}
	var byteLevel bool
	if t.steps, byteLevel, err = buildPreTokenizer(pc); err != nil {
		return nil, err
	}
	if byteLevel {
		if err := model.enableByteLevel(); err != nil {
			return nil, err
		}
	}
	model.enableChunking()
	if err := t.buildPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}

	// The id table: model vocab, then added tokens, which win (AddedVocabulary is asked first).
	maxID := int64(-1)
	for _, id := range m.Vocab {
		maxID = max(maxID, int64(id))
	}
	for _, a := range f.AddedTokens {
		maxID = max(maxID, a.ID)
	}
	// Real vocabularies stay under ~1M ids; the bound keeps a hostile file from making Load
	// allocate per-id tables of gigabytes.
	if maxID >= maxVocab {
		return nil, fmt.Errorf("tokenizer: token id %d is out of range (max %d)", maxID, maxVocab-1)
	}
	t.vocabSize = int(maxID + 1)
	t.idToTok = make([]string, t.vocabSize)
	t.hasID = make([]bool, t.vocabSize)
	t.special = make([]bool, t.vocabSize)
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: negative id %d for %q", id, tok)
		}
		t.idToTok[id], t.hasID[id] = tok, true
	}
	for i := range f.AddedTokens {
		a := f.AddedTokens[i]
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer: negative id %d for added token %q", a.ID, a.Content)
		}
		tok := &addedToken{id: a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip, special: a.Special, norm: a.Normalized}
		t.idToTok[a.ID], t.hasID[a.ID], t.special[a.ID] = a.Content, true, a.Special
		t.addedToID[a.Content] = a.ID
		if a.Normalized {
			pat := a.Content
			if t.norm != nil {
				pat = t.norm(pat)
			}
			t.addedNrm.add(pat, tok)
		} else {
			t.addedRaw.add(a.Content, tok)
		}
	}

	t.maxTokenBytes = t.tokenBound(nc, pc, f.AddedTokens)

	// Rust's decode skips by content (is_special_token(&str)), so a vocab entry spelled like a
	// special token is skipped too.
	specialContent := map[string]bool{}
	for _, a := range f.AddedTokens {
		if a.Special {
			specialContent[a.Content] = true
		}
	}
	t.skippable = make([]bool, t.vocabSize)
	for id, tok := range t.idToTok {
		t.skippable[id] = t.hasID[id] && specialContent[tok]
	}

	dc, err := parseComponent(f.Decoder, "decoder")
	if err != nil {
		return nil, err
	}
	if err := t.buildDecoderPlan(dc); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tokenizer) buildPostProcessor(raw json.RawMessage) error {
	c, err := parseComponent(raw, "post_processor")
	if err != nil || c == nil {
		return err
	}
	adds := 0
	var add func(c *component) error
	add = func(c *component) error {
		switch c.Type {
		case "Sequence":
			for _, r := range c.Processors {
				sub, err := parseComponent(r, "post_processor")
				if err != nil {
					return err
				}
				if sub != nil {
					if err := add(sub); err != nil {
						return err
					}
				}
			}
			return nil
		case "ByteLevel":
			return nil // only trims offsets
		case "TemplateProcessing":
			adds++
			seen := false
			for _, it := range c.Single {
				switch {
				case it.Sequence != nil:
					if it.Sequence.ID != "A" || seen {
						return fmt.Errorf("tokenizer: TemplateProcessing single template %q is not supported", it.Sequence.ID)
					}
					seen = true
				case it.SpecialToken != nil:
					st, ok := c.SpecialTokens[it.SpecialToken.ID]
					if !ok {
						return fmt.Errorf("tokenizer: TemplateProcessing special token %q is missing", it.SpecialToken.ID)
					}
					if seen {
						t.suffixIDs = append(t.suffixIDs, st.IDs...)
					} else {
						t.prefixIDs = append(t.prefixIDs, st.IDs...)
					}
				default:
					return fmt.Errorf("tokenizer: TemplateProcessing item is neither Sequence nor SpecialToken")
				}
			}
			if !seen {
				return fmt.Errorf("tokenizer: TemplateProcessing single template without the sequence is not supported")
			}
			t.post, err = templatePost(c)
			return err
		case "RobertaProcessing", "BertProcessing":
			adds++
			if c.Cls == nil || c.Sep == nil {
				return fmt.Errorf("tokenizer: post_processor %q without cls/sep", c.Type)
			}
			var cls, sep int64
			if json.Unmarshal(c.Cls[1], &cls) != nil || json.Unmarshal(c.Sep[1], &sep) != nil {
				return fmt.Errorf("tokenizer: post_processor %q: bad cls/sep id", c.Type)
			}
			t.prefixIDs, t.suffixIDs = []int64{cls}, []int64{sep}
			t.post = clsSepPost(c.Type == "RobertaProcessing", cls, sep)
			return nil
		}
		return fmt.Errorf("tokenizer: post_processor %q is not supported", c.Type)
	}
	if err := add(c); err != nil {
		return err
	}
	if adds > 1 {
		return fmt.Errorf("tokenizer: post_processor Sequence with more than one template is not supported")
	}
	return nil
}

// encodeState is the per-call scratch of Encode, pooled so steady-state encoding does not
// allocate for it.
type encodeState struct {
	a, b []piece
	sc   splitScratch
}

var encodePool = sync.Pool{New: func() any { return new(encodeState) }}

// Encode tokenizes text. With addSpecialTokens the post-processor's template (e.g. a BOS) is
// applied; added tokens in the text (special or not) are always recognised, as in tokenizers.
// Invalid UTF-8 in text is replaced first, each maximal invalid subpart by one U+FFFD.
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) []int64 {
	return t.AppendEncode(nil, text, addSpecialTokens)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int64, text string, addSpecialTokens bool) []int64 {
	if !utf8.ValidString(text) {
		text = string(appendLossy(nil, []byte(text)))
	}
	if addSpecialTokens {
		dst = append(dst, t.prefixIDs...)
	}
	st := encodePool.Get().(*encodeState)
	if t.addedRaw.empty() {
		dst = t.encodeSegment(st, dst, text, true)
	} else {
		t.addedRaw.split(text, func(a, b int) {
			dst = t.encodeSegment(st, dst, text[a:b], a == 0)
		}, func(tok *addedToken) { dst = append(dst, tok.id) })
	}
	encodePool.Put(st)
	if addSpecialTokens {
		dst = append(dst, t.suffixIDs...)
	}
	return dst
}

// encodeSegment encodes text between raw-matched added tokens: normalize, match normalized
// added tokens, pre-tokenize, BPE.
func (t *Tokenizer) encodeSegment(st *encodeState, dst []int64, s string, atStart bool) []int64 {
	if t.norm != nil {
		s = t.norm(s)
	}
	if t.addedNrm.empty() {
		return t.encodePiece(st, dst, s, atStart)
	}
	t.addedNrm.split(s, func(a, b int) {
		dst = t.encodePiece(st, dst, s[a:b], atStart && a == 0)
	}, func(tok *addedToken) { dst = append(dst, tok.id) })
	return dst
}

func (t *Tokenizer) encodePiece(st *encodeState, dst []int64, s string, atStart bool) []int64 {
	if s == "" {
		return dst
	}
	cur := append(st.a[:0], piece{s, atStart})
	next := st.b[:0]
	for _, step := range t.steps {
		next = next[:0]
		for _, p := range cur {
			next = step.apply(p, next, &st.sc)
		}
		cur, next = next, cur
	}
	for _, p := range cur {
		dst = t.model.appendWord(dst, p.s)
	}
	st.a, st.b = cur[:0], next[:0]
	return dst
}

// VocabSize is the largest id of the model vocab and the added tokens, plus one. Callers bound
// ids by it before decoding.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenToID returns the id of a token string (added tokens first, then the model vocab).
func (t *Tokenizer) TokenToID(tok string) (int64, bool) {
	if id, ok := t.addedToID[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return int64(id), ok
}

// IDToToken returns the token string of an id.
func (t *Tokenizer) IDToToken(id int64) (string, bool) {
	if id < 0 || id >= int64(len(t.idToTok)) || !t.hasID[id] {
		return "", false
	}
	return t.idToTok[id], true
}

// IsSpecial reports whether id is an added token with special=true.
func (t *Tokenizer) IsSpecial(id int64) bool {
	return id >= 0 && id < int64(len(t.special)) && t.special[id]
}

// Decode turns ids back into text as tokenizers' Tokenizer::decode: ids that name no token
// contribute nothing (validate ids against VocabSize first if that matters), special tokens
// are dropped when skipSpecialTokens, and the rest go through the decoder.
func (t *Tokenizer) Decode(ids []int64, skipSpecialTokens bool) string {
	var scratch []byte
	return string(t.appendDecode(nil, &scratch, ids, skipSpecialTokens))
}
