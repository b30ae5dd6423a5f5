package textgen

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// StopSet is a request's stop strings compiled into one Aho-Corasick automaton, so
// each step's new text is searched for all of them in one pass instead of once per
// stop string. It is built once per request and shared, read-only, by its choices.
//
// It finds what CheckStopStrings finds. check_stop_strings searches each stop string
// from len(stop)-1 characters before the new text, so an occurrence counts when it
// starts there or later; in valid UTF-8 that is exactly an occurrence that ends
// inside the new text. The first stop string of the list with such an occurrence
// wins (not the earliest occurrence), at its leftmost one. Each node of the automaton
// keeps the smallest list index among the stop strings that end there, so one scan
// gives that answer. Text that is not valid UTF-8 (no decoder writes it) is left to
// CheckStopStrings, whose character arithmetic the byte automaton cannot follow there.
type StopSet struct {
	stop     []string
	maxRunes int // the longest stop string, in characters
	// The trie, node 0 the root. The edges of node u are labels[first[u]:first[u+1]],
	// sorted, leading to next[...]; root holds the root's edges as a table, since
	// almost every byte of the text starts there.
	root   [256]int32
	first  []int32
	labels []byte
	next   []int32
	fail   []int32
	// out is the smallest stop index ending at the node or at a node on its failure
	// chain (the stop strings that are suffixes of the node's string), -1 if none.
	out []int32
}

// Bounds of CompileStops. For one short stop string the per-string search is as
// fast (BenchmarkStopStrings) and needs no automaton (a long one is walked back over
// each token); above MaxStopSetBytes of stop strings in all the request keeps it,
// so the automaton's memory (about 17 bytes a byte of stop strings kept, 30 during
// the build) is bounded before it is built.
const (
	minCompiledStops   = 2
	maxSimpleStopBytes = 64
	MaxStopSetBytes    = 16 << 10
)

// CompileStops builds the automaton of stop, or returns nil when the per-string
// search is to be used: too few stop strings, too many bytes of them, or one that is
// not valid UTF-8. Empty stop strings are ignored, as CheckStopStrings ignores them.
func CompileStops(stop []string) *StopSet {
	if len(stop) < minCompiledStops && (len(stop) == 0 || len(stop[0]) <= maxSimpleStopBytes) {
		return nil
	}
	return compile(stop)
}

// compile is CompileStops for any number of stop strings.
func compile(stop []string) *StopSet {
	total := 0
	for _, s := range stop {
		total += len(s)
		if total > MaxStopSetBytes || !utf8.ValidString(s) {
			return nil
		}
	}
	// Every byte of a stop string adds at most one node: total+1 bounds the trie.
	nodes := total + 1
	set := &StopSet{stop: stop}
	parent := make([]int32, 1, nodes)
	label := make([]byte, 1, nodes)
	set.out = make([]int32, 1, nodes)
	set.out[0] = -1
	// Inserted in sorted order, a stop string shares with the trie exactly its common
	// prefix with the previous one, and siblings are created in label order.
	order := make([]int32, len(stop))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(stop[a], stop[b]) })
	path := make([]int32, 1, 64) // path[d]: the node at depth d of the previous stop string
	prev := ""
	for _, i := range order {
		s := stop[i]
		set.maxRunes = max(set.maxRunes, utf8.RuneCountInString(s))
		if s == "" {
			continue
		}
		common := commonPrefix(prev, s)
		path = path[:common+1]
		for d := common; d < len(s); d++ {
			parent = append(parent, path[d])
			label = append(label, s[d])
			set.out = append(set.out, -1)
			path = append(path, int32(len(parent)-1))
		}
		if end := path[len(s)]; set.out[end] < 0 || i < set.out[end] {
			set.out[end] = i
		}
		prev = s
	}
	set.layOut(parent, label)
	set.link()
	return set
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// layOut stores each node's edges contiguously (a counting sort by parent, which
// keeps the creation order, so the labels of a node stay sorted).
func (s *StopSet) layOut(parent []int32, label []byte) {
	n := len(parent)
	s.first = make([]int32, n+1)
	for v := 1; v < n; v++ {
		s.first[parent[v]+1]++
	}
	for u := range n {
		s.first[u+1] += s.first[u]
	}
	s.labels = make([]byte, n-1)
	s.next = make([]int32, n-1)
	fill := slices.Clone(s.first[:n])
	for v := 1; v < n; v++ {
		k := fill[parent[v]]
		fill[parent[v]]++
		s.labels[k], s.next[k] = label[v], int32(v)
	}
	for k := s.first[0]; k < s.first[1]; k++ {
		s.root[s.labels[k]] = s.next[k]
	}
}

// link computes the failure links breadth-first (a node's failure is shallower, so
// it is complete when the node is reached) and folds each failure's out into the
// node's.
func (s *StopSet) link() {
	n := len(s.first) - 1
	s.fail = make([]int32, n)
	queue := make([]int32, 0, n)
	queue = append(queue, s.next[s.first[0]:s.first[1]]...)
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		for k := s.first[u]; k < s.first[u+1]; k++ {
			v := s.next[k]
			if u != 0 {
				s.fail[v] = s.step(s.fail[u], s.labels[k])
			}
			if o := s.out[s.fail[v]]; o >= 0 && (s.out[v] < 0 || o < s.out[v]) {
				s.out[v] = o
			}
			queue = append(queue, v)
		}
	}
}

// step is the automaton's transition from node u on byte c.
func (s *StopSet) step(u int32, c byte) int32 {
	for u != 0 {
		lo, hi := s.first[u], s.first[u+1]
		if hi-lo > 8 {
			if k, ok := slices.BinarySearch(s.labels[lo:hi], c); ok {
				return s.next[lo+int32(k)]
			}
		} else {
			for k := lo; k < hi; k++ {
				if s.labels[k] == c {
					return s.next[k]
				}
			}
		}
		u = s.fail[u]
	}
	return s.root[c]
}

// scan runs the automaton from node u over text[from:] and returns the node it ends
// in, with the smallest stop index that occurs ending after byte after (-1 if none)
// and where its first such occurrence ends.
func (s *StopSet) scan(u int32, text []byte, from, after int) (int32, int32, int) {
	best, end := int32(-1), 0
	for i := from; i < len(text); i++ {
		u = s.step(u, text[i])
		if o := s.out[u]; o >= 0 && i >= after && (best < 0 || o < best) {
			best, end = o, i+1
			if best == 0 {
				break
			}
		}
	}
	return u, best, end
}

// result turns a match into CheckStopStrings' answer.
func (s *StopSet) result(text []byte, idx int32, end int, includeInOutput bool) (string, int, bool) {
	str := s.stop[idx]
	if !includeInOutput {
		return str, end - len(str), true
	}
	if end >= len(text) {
		return str, -1, true
	}
	return str, end, true
}

// Check is CheckStopStrings with the automaton: the new text and the characters
// before it where a stop string could begin are scanned once.
func (s *StopSet) Check(text []byte, newBytes int, includeInOutput bool) (string, int, bool) {
	if newBytes <= 0 {
		return "", -1, false
	}
	newStart := len(text) - newBytes
	from := backRunes(text, newStart, s.maxRunes-1)
	if !validFrom(text, from, newStart) {
		return CheckStopStrings(text, newBytes, s.stop, includeInOutput)
	}
	_, idx, end := s.scan(0, text, from, newStart)
	if idx < 0 {
		return "", -1, false
	}
	return s.result(text, idx, end, includeInOutput)
}

// validFrom reports whether text[from:] is valid UTF-8 with a character starting at
// at, where the automaton's byte positions and the characters agree.
func validFrom(text []byte, from, at int) bool {
	return utf8.Valid(text[from:]) && (at >= len(text) || utf8.RuneStart(text[at]))
}
