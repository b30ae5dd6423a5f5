package tokenizer

import (
	"errors"
	"fmt"
)

// Pair encoding and truncation, as tokenizers' Tokenizer::encode does them for a (text,
// text_pair) input: each text is encoded alone (the second with type id 1), both are
// truncated to fit max_length minus the special tokens the template adds, and the
// post-processor's pair template joins them. Cross-encoders (rerankers) read their input
// this way.

// inheritType marks a template sequence that keeps its encoding's own type ids (0 for the
// first text, 1 for the second), as BertProcessing does.
const inheritType = 0xFF

// postPart is one item of a post-processor template: special token ids, or a sequence.
type postPart struct {
	seq    int8 // -1: the special ids below; 0: the first text; 1: the second
	ids    []int64
	typeID uint8
}

// postTemplate is a post-processor's single and pair templates.
type postTemplate struct {
	single, pair []postPart
	// zeroTypes: every type id is 0, special tokens added or not (RobertaProcessing).
	zeroTypes bool
}

func templatePost(c *component) (*postTemplate, error) {
	conv := func(items []templateItem, what string) ([]postPart, error) {
		var parts []postPart
		for _, it := range items {
			switch {
			case it.Sequence != nil:
				var seq int8
				switch it.Sequence.ID {
				case "A":
				case "B":
					seq = 1
				default:
					return nil, fmt.Errorf("tokenizer: TemplateProcessing %s sequence %q", what, it.Sequence.ID)
				}
				parts = append(parts, postPart{seq: seq, typeID: uint8(min(it.Sequence.TypeID, 0xFE))})
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("tokenizer: TemplateProcessing special token %q is missing", it.SpecialToken.ID)
				}
				parts = append(parts, postPart{seq: -1, ids: st.IDs, typeID: uint8(min(it.SpecialToken.TypeID, 0xFE))})
			default:
				return nil, fmt.Errorf("tokenizer: TemplateProcessing item is neither Sequence nor SpecialToken")
			}
		}
		return parts, nil
	}
	single, err := conv(c.Single, "single")
	if err != nil {
		return nil, err
	}
	pair, err := conv(c.Pair, "pair")
	if err != nil {
		return nil, err
	}
	return &postTemplate{single: single, pair: pair}, nil
}

// clsSepPost is RobertaProcessing (cls A sep sep B sep) or BertProcessing (cls A sep B sep).
func clsSepPost(roberta bool, cls, sep int64) *postTemplate {
	c, s := []int64{cls}, []int64{sep}
	p := &postTemplate{single: []postPart{{seq: -1, ids: c}, {seq: 0, typeID: inheritType}, {seq: -1, ids: s}}, zeroTypes: roberta}
	p.pair = append([]postPart(nil), p.single...)
	if roberta {
		// RoBERTa has no segment embeddings: the whole pair is type 0.
		p.pair = append(p.pair, postPart{seq: -1, ids: s}, postPart{seq: 1}, postPart{seq: -1, ids: s})
	} else {
		p.pair = append(p.pair, postPart{seq: 1, typeID: inheritType}, postPart{seq: -1, ids: s, typeID: 1})
	}
	return p
}

// llamaPost is the template transformers' update_post_processor builds for the Llama and
// Gemma classes: bos? $A:0 eos?, and for pairs bos:1? $B:1 eos:1? after it.
func llamaPost(prefix, suffix []int64) *postTemplate {
	p := &postTemplate{}
	add := func(seq int8, typeID uint8) {
		if len(prefix) > 0 {
			p.pair = append(p.pair, postPart{seq: -1, ids: prefix, typeID: typeID})
		}
		p.pair = append(p.pair, postPart{seq: seq, typeID: typeID})
		if len(suffix) > 0 {
			p.pair = append(p.pair, postPart{seq: -1, ids: suffix, typeID: typeID})
		}
	}
	add(0, 0)
	p.single = append([]postPart(nil), p.pair...)
	add(1, 1)
	return p
}

// TruncationStrategy is tokenizers' TruncationStrategy.
type TruncationStrategy uint8

const (
	LongestFirst TruncationStrategy = iota
	OnlyFirst
	OnlySecond
)

// Truncation is what transformers passes to enable_truncation for one call.
type Truncation struct {
	// MaxLength bounds the whole encoding, special tokens included; 0 is no truncation.
	MaxLength int
	Strategy  TruncationStrategy
	// Left keeps the last tokens (truncation_side "left"); the default keeps the first.
	Left bool
}

// Errors of truncation, as tokenizers raises them.
var (
	ErrTruncationTooShort = errors.New("tokenizer: truncation: the sequence to truncate is too short to respect the provided max_length")
	ErrNoPairTemplate     = errors.New("tokenizer: the post-processor has no pair template")
)

// NumSpecialTokensToAdd is how many tokens the post-processor adds to one text (pair false)
// or a pair, as tokenizers' num_special_tokens_to_add.
func (t *Tokenizer) NumSpecialTokensToAdd(pair bool) int {
	if t.post == nil {
		return 0
	}
	parts := t.post.single
	if pair {
		parts = t.post.pair
	}
	n := 0
	for _, p := range parts {
		n += len(p.ids)
	}
	return n
}

// EncodeTruncated is Encode with tokenizers' truncation: the text is cut to MaxLength minus
// the special tokens, which are then added, so they survive.
func (t *Tokenizer) EncodeTruncated(text string, addSpecialTokens bool, tr Truncation) ([]int64, error) {
	ids, _, err := t.encodeInputs(text, "", false, addSpecialTokens, tr)
	return ids, err
}

// EncodePair encodes (a, b) as tokenizers' encode(a, pair=b): ids and type ids. Without
// addSpecialTokens (or without a post-processor) the two texts are concatenated, type ids 0
// then 1.
func (t *Tokenizer) EncodePair(a, b string, addSpecialTokens bool, tr Truncation) (ids []int64, typeIDs []uint8, err error) {
	return t.encodeInputs(a, b, true, addSpecialTokens, tr)
}

func (t *Tokenizer) encodeInputs(a, b string, isPair, addSpecial bool, tr Truncation) ([]int64, []uint8, error) {
	if isPair && addSpecial && t.post != nil && len(t.post.pair) == 0 {
		return nil, nil, ErrNoPairTemplate
	}
	ea := t.Encode(a, false)
	var eb []int64
	if isPair {
		eb = t.Encode(b, false)
	}
	if tr.MaxLength > 0 {
		limit := tr.MaxLength
		if addSpecial {
			n := t.NumSpecialTokensToAdd(isPair)
			if n > limit {
				// Rust would underflow max_length - n; transformers refuses it earlier.
				return nil, nil, fmt.Errorf("tokenizer: truncation max_length %d does not leave room past the %d special tokens", limit, n)
			}
			limit -= n
		}
		var err error
		if ea, eb, err = truncatePair(ea, eb, isPair, limit, tr); err != nil {
			return nil, nil, err
		}
	}
	if !addSpecial || t.post == nil {
		ids := append(ea, eb...)
		types := make([]uint8, len(ids))
		for i := len(ea); i < len(ids) && (t.post == nil || !t.post.zeroTypes); i++ {
			types[i] = 1
		}
		return ids, types, nil
	}
	parts := t.post.single
	if isPair {
		parts = t.post.pair
	}
	var ids []int64
	var types []uint8
	for _, p := range parts {
		seg, own := p.ids, uint8(0)
		switch p.seq {
		case 0:
			seg = ea
		case 1:
			seg, own = eb, 1
		}
		ty := p.typeID
		if ty == inheritType {
			ty = own
		}
		ids = append(ids, seg...)
		for range seg {
			types = append(types, ty)
		}
	}
	return ids, types, nil
}

// truncatePair is tokenizers' truncate_encodings (utils/truncation.rs) with stride 0.
func truncatePair(a, b []int64, isPair bool, limit int, tr Truncation) ([]int64, []int64, error) {
	if limit == 0 {
		return a[:0], b[:0], nil
	}
	total := len(a) + len(b)
	if total <= limit {
		return a, b, nil
	}
	cut := func(s []int64, n int) []int64 { return cutTo(s, n, tr.Left) }
	switch tr.Strategy {
	case OnlyFirst, OnlySecond:
		toRemove := total - limit
		target := &a
		if tr.Strategy == OnlySecond {
			if !isPair {
				return nil, nil, errors.New("tokenizer: truncation: second sequence not provided")
			}
			target = &b
		}
		if len(*target) <= toRemove {
			return nil, nil, ErrTruncationTooShort
		}
		*target = cut(*target, len(*target)-toRemove)
		return a, b, nil
	}
	if !isPair {
		return cut(a, limit), b, nil
	}
	n1, n2 := len(a), len(b)
	swap := n1 > n2
	if swap {
		n1, n2 = n2, n1
	}
	if n1 > limit {
		n2 = n1
	} else {
		n2 = max(n1, limit-n1)
	}
	if n1+n2 > limit {
		n1 = limit / 2
		n2 = n1 + limit%2
	}
	if swap {
		n1, n2 = n2, n1
	}
	return cut(a, n1), cut(b, n2), nil
}

// cutTo keeps n tokens of s: the first ones, or the last when left.
func cutTo(s []int64, n int, left bool) []int64 {
	if n >= len(s) {
		return s
	}
	if left {
		return s[len(s)-n:]
	}
	return s[:n]
}
