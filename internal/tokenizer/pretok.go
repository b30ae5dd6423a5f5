package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is a pre-tokenization split. atStart: it begins at offset 0 of the original input (the
// Metaspace "first" prepend scheme depends on it).
type piece struct {
	s       string
	atStart bool
}

// preStep is one pre-tokenizer: it splits p into sub-pieces, appended to dst.
type preStep interface {
	apply(p piece, dst []piece, sc *splitScratch) []piece
}

// splitScratch holds the buffers a split reuses across calls (pooled with the encode state).
type splitScratch struct {
	ms   []int
	segs []seg
	out  []seg
}

// matcher finds the non-overlapping matches of a pattern, leftmost first, as Rust's find_iter.
type matcher interface {
	// appendMatches appends [start, end) byte offsets of each match in s.
	appendMatches(s string, dst []int) []int
}

type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("tokenizer: split behavior %q is not supported", s)
}

// splitStep is NormalizedString::split with a pattern: the matches and the gaps between them
// cover the input; behavior decides how matches attach; empty pieces are dropped.
type splitStep struct {
	m        matcher
	behavior behavior
	invert   bool
}

type seg struct {
	start, end int
	match      bool
}

func (st *splitStep) apply(p piece, dst []piece, sc *splitScratch) []piece {
	ms := st.m.appendMatches(p.s, sc.ms[:0])
	sc.ms = ms
	segs := sc.segs[:0]
	prev := 0
	for i := 0; i < len(ms); i += 2 {
		if ms[i] != prev {
			segs = append(segs, seg{prev, ms[i], false})
		}
		segs = append(segs, seg{ms[i], ms[i+1], true})
		prev = ms[i+1]
	}
	if prev != len(p.s) {
		segs = append(segs, seg{prev, len(p.s), false})
	}
	sc.segs = segs
	if st.invert {
		for i := range segs {
			segs[i].match = !segs[i].match
		}
	}
	return emitSegs(p, segs, st.behavior, dst, sc)
}

func emitSegs(p piece, segs []seg, b behavior, dst []piece, sc *splitScratch) []piece {
	var out []seg
	switch b {
	case removed:
		for _, s := range segs {
			if !s.match {
				out = append(out, s)
			}
		}
	case isolated:
		out = segs
	case mergedWithPrevious:
		prevMatch := false
		out = sc.out[:0]
		for _, s := range segs {
			if s.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, seg{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	case mergedWithNext:
		prevMatch := false
		rev := sc.out[:0]
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.match && !prevMatch && len(rev) > 0 {
				rev[len(rev)-1].start = s.start
			} else {
				rev = append(rev, seg{s.start, s.end, false})
			}
			prevMatch = s.match
		}
		out = rev
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case contiguous:
		prevMatch := false
		out = sc.out[:0]
		for _, s := range segs {
			if s.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, seg{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	}
	if b != isolated {
		sc.out = out[:0]
	}
	for _, s := range out {
		if s.end > s.start {
			dst = append(dst, piece{p.s[s.start:s.end], p.atStart && s.start == 0})
		}
	}
	return dst
}

// literalMatcher finds a fixed string (a Split "String" pattern).
type literalMatcher string

func (l literalMatcher) appendMatches(s string, dst []int) []int {
	off := 0
	for {
		i := strings.Index(s[off:], string(l))
		if i < 0 {
			return dst
		}
		dst = append(dst, off+i, off+i+len(l))
		off += i + len(l)
	}
}

// charMatcher makes every char satisfying f its own match, as the Rust char-predicate Pattern.
type charMatcher func(rune) bool

func (f charMatcher) appendMatches(s string, dst []int) []int {
	for i, r := range s {
		if f(r) {
			dst = append(dst, i, i+utf8.RuneLen(r))
		}
	}
	return dst
}

// digitsStep is the Digits pre-tokenizer.
type digitsStep struct{ individual bool }

func isNumeric(r rune) bool { return unicode.In(r, unicode.Nd, unicode.Nl, unicode.No) }

func (d digitsStep) apply(p piece, dst []piece, sc *splitScratch) []piece {
	st := splitStep{m: charMatcher(isNumeric), behavior: contiguous}
	if d.individual {
		st.behavior = isolated
	}
	return st.apply(p, dst, sc)
}

// metaspaceStep is the Metaspace pre-tokenizer: spaces become the replacement char, a
// replacement char is prepended per prepend_scheme, and with split the piece is cut before
// each replacement char.
type metaspaceStep struct {
	repl   string
	scheme string // "always", "first", "never"
	split  bool
}

func (m metaspaceStep) apply(p piece, dst []piece, sc *splitScratch) []piece {
	s := strings.ReplaceAll(p.s, " ", m.repl)
	if !strings.HasPrefix(s, m.repl) && (m.scheme == "always" || (m.scheme == "first" && p.atStart)) {
		s = m.repl + s
	}
	q := piece{s, p.atStart}
	if !m.split {
		return append(dst, q)
	}
	st := splitStep{m: literalMatcher(m.repl), behavior: mergedWithNext}
	return st.apply(q, dst, sc)
}

// byteLevelStep is the splitting half of the ByteLevel pre-tokenizer; the byte-to-char half is
// folded into the BPE model, which reads raw bytes (bpe.byteLevel).
type byteLevelStep struct {
	addPrefixSpace bool
	re             matcher // nil unless use_regex
}

func (b byteLevelStep) apply(p piece, dst []piece, sc *splitScratch) []piece {
	if b.addPrefixSpace && !strings.HasPrefix(p.s, " ") {
		p.s = " " + p.s
	}
	if b.re == nil {
		return append(dst, p)
	}
	st := splitStep{m: b.re, behavior: isolated}
	return st.apply(p, dst, sc)
}

// gpt2Pattern is the regex the ByteLevel pre-tokenizer splits with when use_regex is set.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// buildPreTokenizer flattens the pre-tokenizer into steps and reports whether it ends with
// ByteLevel (which then must be the last step: later steps would see mapped chars).
func buildPreTokenizer(c *component) (steps []preStep, byteLevel bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	var add func(c *component) error
	add = func(c *component) error {
		if byteLevel {
			return fmt.Errorf("tokenizer: pre_tokenizer %q after ByteLevel is not supported", c.Type)
		}
		switch c.Type {
		case "Sequence":
			for _, raw := range c.PreTokenizers {
				sub, err := parseComponent(raw, "pre_tokenizer")
				if err != nil {
					return err
				}
				if sub == nil {
					continue
				}
				if err := add(sub); err != nil {
					return err
				}
			}
			return nil
		case "Split":
			b, err := parseBehavior(c.Behavior)
			if err != nil {
				return err
			}
			m, err := patternMatcher(c.Pattern)
			if err != nil {
				return err
			}
			steps = append(steps, &splitStep{m: m, behavior: b, invert: c.Invert})
			return nil
		case "Digits":
			steps = append(steps, digitsStep{individual: c.IndividualDigits})
			return nil
		case "Metaspace":
			repl := c.Replacement
			if utf8.RuneCountInString(repl) != 1 {
				return fmt.Errorf("tokenizer: pre_tokenizer \"Metaspace\" replacement %q is not one char", repl)
			}
			scheme := c.PrependScheme
			if scheme == "" {
				scheme = "always"
				if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
					scheme = "never"
				}
			}
			if scheme != "always" && scheme != "first" && scheme != "never" {
				return fmt.Errorf("tokenizer: Metaspace prepend_scheme %q is not supported", scheme)
			}
			steps = append(steps, metaspaceStep{repl: repl, scheme: scheme, split: c.Split == nil || *c.Split})
			return nil
		case "ByteLevel":
			st := byteLevelStep{addPrefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace}
			if c.UseRegex == nil || *c.UseRegex {
				m, err := regexMatcher(gpt2Pattern)
				if err != nil {
					return err
				}
				st.re = m
			}
			steps = append(steps, st)
			byteLevel = true
			return nil
		}
		return fmt.Errorf("tokenizer: pre_tokenizer %q is not supported", c.Type)
	}
	err = add(c)
	return steps, byteLevel, err
}

func patternMatcher(p *patternJSON) (matcher, error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("tokenizer: Split without a pattern is not supported")
	case p.String != nil:
		if *p.String == "" {
			return nil, fmt.Errorf("tokenizer: Split with an empty String pattern is not supported")
		}
		return literalMatcher(*p.String), nil
	case p.Regex != nil:
		return regexMatcher(*p.Regex)
	}
	return nil, fmt.Errorf("tokenizer: Split pattern is neither String nor Regex")
}
