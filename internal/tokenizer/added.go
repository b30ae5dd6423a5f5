package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	id                                        int64
	content                                   string
	singleWord, lstrip, rstrip, special, norm bool
}

// addedMatcher finds added tokens leftmost-longest, as the aho-corasick automaton (MatchKind
// LeftmostLongest) of AddedVocabulary does. A byte trie: added-token sets are small and their
// first bytes rare in text, so the per-position test is one table load.
type addedMatcher struct {
	first [256]bool
	edges map[uint64]int32 // node<<8 | byte -> child node
	term  []int32          // node -> index into tokens, -1 if none
	toks  []*addedToken
}

func newAddedMatcher() *addedMatcher {
	return &addedMatcher{edges: map[uint64]int32{}, term: []int32{-1}}
}

func (m *addedMatcher) add(pattern string, tok *addedToken) {
	if pattern == "" {
		return
	}
	m.first[pattern[0]] = true
	node := int32(0)
	for i := 0; i < len(pattern); i++ {
		k := uint64(node)<<8 | uint64(pattern[i])
		next, ok := m.edges[k]
		if !ok {
			next = int32(len(m.term))
			m.term = append(m.term, -1)
			m.edges[k] = next
		}
		node = next
	}
	if m.term[node] < 0 {
		m.term[node] = int32(len(m.toks))
		m.toks = append(m.toks, tok)
	}
}

func (m *addedMatcher) empty() bool { return len(m.toks) == 0 }

// longestAt returns the longest token matching s at i.
func (m *addedMatcher) longestAt(s string, i int) (*addedToken, int) {
	node := int32(0)
	var best *addedToken
	bestEnd := -1
	for j := i; j < len(s); j++ {
		next, ok := m.edges[uint64(node)<<8|uint64(s[j])]
		if !ok {
			break
		}
		node = next
		if t := m.term[node]; t >= 0 {
			best, bestEnd = m.toks[t], j+1
		}
	}
	return best, bestEnd
}

// split is AddedVocabulary::find_matches: it calls text(s) for each run of ordinary text and
// tok(t) for each added token, honouring single_word, lstrip and rstrip.
func (m *addedMatcher) split(s string, text func(start, end int), tok func(t *addedToken)) {
	startOffset := 0
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		t, end := m.longestAt(s, i)
		if t == nil {
			i++
			continue
		}
		start, stop := i, end
		i = end // the automaton resumes after the match, whatever strip does
		if t.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.lstrip {
			ns := start
			for ns > 0 {
				r, n := utf8.DecodeLastRuneInString(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= n
			}
			start = max(ns, startOffset)
		}
		if t.rstrip {
			for stop < len(s) {
				r, n := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
		}
		if start > startOffset {
			text(startOffset, start)
		}
		tok(t)
		startOffset = stop
	}
	if startOffset < len(s) {
		text(startOffset, len(s))
	}
}

// isWordChar approximates Rust regex's Unicode \w (alphabetic, marks, digits, connector
// punctuation).
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
