package tokenizer

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a piece of input text before pre-tokenization. Offsets are not tracked:
// this package produces ids, never alignments.
type normalizer func(s string) string

func buildNormalizer(c *component) (normalizer, error) {
	if c == nil {
		return nil, nil
	}
	switch c.Type {
	case "Sequence":
		var steps []normalizer
		for _, raw := range c.Normalizers {
			sub, err := parseComponent(raw, "normalizer")
			if err != nil {
				return nil, err
			}
			n, err := buildNormalizer(sub)
			if err != nil {
				return nil, err
			}
			if n != nil {
				steps = append(steps, n)
			}
		}
		switch len(steps) {
		case 0:
			return nil, nil
		case 1:
			return steps[0], nil
		}
		return func(s string) string {
			for _, n := range steps {
				s = n(s)
			}
			return s
		}, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil {
			return nil, fmt.Errorf("tokenizer: normalizer \"Replace\" with a Regex pattern is not supported")
		}
		from, to := *c.Pattern.String, *c.Content
		if from == "" {
			return nil, fmt.Errorf("tokenizer: normalizer \"Replace\" with an empty pattern is not supported")
		}
		return func(s string) string { return strings.ReplaceAll(s, from, to) }, nil
	case "NFC":
		return func(s string) string { return norm.NFC.String(s) }, nil
	case "NFD":
		return func(s string) string { return norm.NFD.String(s) }, nil
	case "NFKC":
		return func(s string) string { return norm.NFKC.String(s) }, nil
	case "NFKD":
		return func(s string) string { return norm.NFKD.String(s) }, nil
	case "Lowercase":
		return lowercase, nil
	case "Strip":
		left := c.StripLeft == nil || *c.StripLeft
		right := c.StripRight == nil || *c.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("tokenizer: normalizer %q is not supported", c.Type)
}

// lowercase is Rust's char::to_lowercase applied per char (no context, so no final sigma); the
// one unconditional multi-char mapping Go's unicode.ToLower lacks is U+0130.
func lowercase(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == 0x130 {
			b.WriteString("i\u0307")
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
