package tokenizer

import (
	"container/heap"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/puzpuzpuz/xsync/v4"
)

// bpe is the BPE model of tokenizers/src/models/bpe: merges applied lowest rank first (ties:
// leftmost), exactly as Word::merge_all does with its priority queue, including its way of
// discarding stale queue entries.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]uint64 // (left id<<32 | right id) -> (rank<<32 | new id)
	unk          int32             // -1 when the model has no unk_token
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string     // continuing_subword_prefix
	suffix       string     // end_of_word_suffix
	byteTok      [256]int32 // <0xXX> ids for byte_fallback; -1 when absent

	// byteLevel: words arrive as raw bytes and each byte b stands for the vocab entry of the
	// GPT-2 byte-to-char map, so no mapped string is ever built (see ByteLevel).
	byteLevel bool
	byteID    [256]int32
	rawVocab  map[string]int32 // byteLevel: vocab keyed by the raw bytes a token stands for

	cache wordCache

	spChunk bool // see enableChunking
	cross   []crossTok
}

func newBPE(m *modelJSON) (*bpe, error) {
	b := &bpe{
		vocab:        make(map[string]int32, len(m.Vocab)),
		unk:          -1,
		fuseUnk:      m.FuseUnk,
		byteFallback: m.ByteFallback,
		ignoreMerges: m.IgnoreMerges,
		cache:        wordCache{m: xsync.NewMap[string, []int32]()},
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("tokenizer: BPE dropout is not supported")
	}
	if m.ContinuingSubwordPrefix != nil {
		b.prefix = *m.ContinuingSubwordPrefix
	}
	if m.EndOfWordSuffix != nil {
		b.suffix = *m.EndOfWordSuffix
	}
	for tok, id := range m.Vocab {
		b.vocab[tok] = id
	}
	if m.UnkToken != nil {
		id, ok := b.vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("tokenizer: BPE unk_token %q is not in the vocab", *m.UnkToken)
		}
		b.unk = id
	}
	for i := range b.byteTok {
		b.byteTok[i] = -1
		if id, ok := b.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.byteTok[i] = id
		}
	}
	pairs, err := m.mergePairs()
	if err != nil {
		return nil, err
	}
	b.merges = make(map[uint64]uint64, len(pairs))
	for rank, p := range pairs {
		l, ok1 := b.vocab[p[0]]
		r, ok2 := b.vocab[p[1]]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("tokenizer: BPE merge %q %q: token not in the vocab", p[0], p[1])
		}
		right := strings.TrimPrefix(p[1], b.prefix)
		if b.prefix == "" {
			right = p[1]
		}
		n, ok := b.vocab[p[0]+right]
		if !ok {
			return nil, fmt.Errorf("tokenizer: BPE merge %q %q: merged token not in the vocab", p[0], p[1])
		}
		// A later duplicate overwrites an earlier one, as collecting into a HashMap does.
		b.merges[uint64(uint32(l))<<32|uint64(uint32(r))] = uint64(rank)<<32 | uint64(uint32(n))
	}
	return b, nil
}

// enableByteLevel switches the model to raw-byte words: the ByteLevel pre-tokenizer is the last
// pre-tokenization step, so every word the model sees is the byte-to-char image of raw bytes.
func (b *bpe) enableByteLevel() error {
	if b.prefix != "" || b.suffix != "" || b.byteFallback {
		return fmt.Errorf("tokenizer: ByteLevel with continuing_subword_prefix, end_of_word_suffix or byte_fallback is not supported")
	}
	b.byteLevel = true
	for i := range 256 {
		id, ok := b.vocab[string(byteToRune[i])]
		if !ok {
			id = -1
		}
		b.byteID[i] = id
	}
	b.rawVocab = make(map[string]int32, len(b.vocab))
	for tok, id := range b.vocab {
		if raw, ok := byteLevelDecode(tok); ok {
			b.rawVocab[raw] = id
		}
	}
	return nil
}

// byteLevelDecode maps a byte-level token back to the raw bytes it stands for.
func byteLevelDecode(tok string) (string, bool) {
	buf := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= int32(len(runeToByte)) || runeToByte[r] < 0 {
			return "", false
		}
		buf = append(buf, byte(runeToByte[r]))
	}
	return string(buf), true
}

type symbol struct {
	id         int32
	prev, next int32
	len        int32 // 0: merged away
}

type mergeItem struct {
	pos   int32
	rank  uint32
	newID int32
}

type mergeHeap []mergeItem

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type bpeScratch struct {
	syms []symbol
	heap mergeHeap
	ids  []int32
}

var scratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

// appendWord tokenizes one pre-tokenized word and appends its ids.
func (b *bpe) appendWord(dst []int64, word string) []int64 {
	if !b.spChunk || len(word) < 2*len(metaspace) {
		return b.appendChunk(dst, word)
	}
	last := 0
	for p := len(metaspace); p+len(metaspace) <= len(word); p++ {
		if word[p] != metaspace[0] || word[p:p+len(metaspace)] != metaspace || word[p-len(metaspace):p] == metaspace || !b.safeCut(word, p) {
			continue
		}
		dst = b.appendChunk(dst, word[last:p])
		last = p
	}
	return b.appendChunk(dst, word[last:])
}

// metaspace is SentencePiece's word-start marker, U+2581.
const metaspace = "\u2581"

// crossTok is a vocab token with a metaspace right after a non-metaspace char, at offsets ks.
type crossTok struct {
	s  string
	ks []int
}

// enableChunking turns on splitting of SentencePiece-style words (Llama 2, Gemma: no
// pre-tokenizer, so a whole prompt is one "word") before each metaspace that follows another
// char. Merges only ever form vocab tokens, so a cut no vocab token can span changes nothing:
// the pieces merge exactly as the whole would, and become cacheable. The few tokens that do
// span such a cut (Gemma 3 has ">▁</") make the cuts they could cover unsafe (safeCut).
func (b *bpe) enableChunking() {
	if b.byteLevel || b.ignoreMerges || b.prefix != "" || b.suffix != "" {
		return
	}
	if _, ok := b.vocab[metaspace]; !ok {
		return
	}
	var cross []crossTok
	for tok := range b.vocab {
		var ks []int
		for k := len(metaspace); k+len(metaspace) <= len(tok); k++ {
			if tok[k:k+len(metaspace)] == metaspace && tok[k-len(metaspace):k] != metaspace && utf8.RuneStart(tok[k]) {
				ks = append(ks, k)
			}
		}
		if ks != nil {
			cross = append(cross, crossTok{tok, ks})
		}
	}
	if len(cross) > 64 {
		return
	}
	b.cross, b.spChunk = cross, true
}

func (b *bpe) safeCut(word string, p int) bool {
	for _, c := range b.cross {
		for _, k := range c.ks {
			if p-k >= 0 && p-k+len(c.s) <= len(word) && word[p-k:p-k+len(c.s)] == c.s {
				return false
			}
		}
	}
	return true
}

// appendChunk runs BPE on one word (or safe chunk of one) through the cache.
func (b *bpe) appendChunk(dst []int64, word string) []int64 {
	if word == "" {
		return dst
	}
	if ids, ok := b.cache.get(word); ok {
		for _, id := range ids {
			dst = append(dst, int64(id))
		}
		return dst
	}
	if b.ignoreMerges {
		var id int32
		var ok bool
		if b.byteLevel {
			id, ok = b.rawVocab[word]
		} else {
			id, ok = b.vocab[word]
		}
		if ok {
			return append(dst, int64(id))
		}
	}
	s := scratchPool.Get().(*bpeScratch)
	s.syms = b.initSymbols(s.syms[:0], word)
	b.mergeAll(s)
	s.ids = s.ids[:0]
	for i := int32(0); i >= 0 && int(i) < len(s.syms); i = s.syms[i].next {
		s.ids = append(s.ids, s.syms[i].id)
	}
	for _, id := range s.ids {
		dst = append(dst, int64(id))
	}
	if len(word) < maxCachedWord {
		// Cloned: the word is a slice of the caller's text, which must not stay reachable.
		b.cache.put(strings.Clone(word), append([]int32(nil), s.ids...))
	}
	scratchPool.Put(s)
	return dst
}

// initSymbols is BPE::merge_word before merging: one symbol per char (per byte for ByteLevel),
// with continuing_subword_prefix / end_of_word_suffix, byte_fallback and (fused) unk.
func (b *bpe) initSymbols(syms []symbol, word string) []symbol {
	push := func(id int32, n int) {
		prev := int32(len(syms) - 1)
		syms = append(syms, symbol{id: id, prev: prev, next: int32(len(syms) + 1), len: int32(n)})
	}
	if b.byteLevel {
		for i := 0; i < len(word); i++ {
			id := b.byteID[word[i]]
			if id < 0 {
				// A byte-level vocab without all 256 byte chars: treat like a missing char.
				if b.unk >= 0 {
					id = b.unk
				} else {
					continue
				}
			}
			push(id, 1)
		}
		if len(syms) > 0 {
			syms[len(syms)-1].next = -1
		}
		return syms
	}
	unkPending := int32(-1) // length of a pending (possibly fused) unk
	var buf []byte
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		end := i + n
		var id int32
		var ok bool
		s := word[i:end]
		if b.prefix != "" || b.suffix != "" {
			buf = buf[:0]
			if i > 0 {
				buf = append(buf, b.prefix...)
			}
			buf = append(buf, s...)
			if end == len(word) {
				buf = append(buf, b.suffix...)
			}
			s = string(buf)
		}
		i = end
		if id, ok = b.vocab[s]; ok {
			if unkPending >= 0 {
				push(b.unk, int(unkPending))
				unkPending = -1
			}
			push(id, n)
			continue
		}
		if b.byteFallback {
			all := true
			for j := 0; j < len(s); j++ {
				if b.byteTok[s[j]] < 0 {
					all = false
					break
				}
			}
			if all {
				// As merge_word: a pending unk is not flushed before the byte tokens.
				for j := 0; j < len(s); j++ {
					push(b.byteTok[s[j]], 1)
				}
				continue
			}
		}
		if b.unk >= 0 {
			if unkPending >= 0 && b.fuseUnk {
				unkPending += int32(n)
			} else {
				if unkPending >= 0 {
					push(b.unk, int(unkPending))
				}
				unkPending = int32(n)
			}
		}
	}
	if unkPending >= 0 {
		push(b.unk, int(unkPending))
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

func (b *bpe) lookup(l, r int32) (rank uint32, newID int32, ok bool) {
	v, ok := b.merges[uint64(uint32(l))<<32|uint64(uint32(r))]
	return uint32(v >> 32), int32(uint32(v)), ok
}

// mergeAll is Word::merge_all (without dropout).
func (b *bpe) mergeAll(s *bpeScratch) {
	syms := s.syms
	h := s.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if rank, n, ok := b.lookup(syms[i].id, syms[i+1].id); ok {
			h = append(h, mergeItem{pos: int32(i), rank: rank, newID: n})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		top := heap.Pop(&h).(mergeItem)
		cur := &syms[top.pos]
		if cur.len == 0 || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if _, n, ok := b.lookup(cur.id, right.id); !ok || n != top.newID {
			continue
		}
		cur.id = top.newID
		cur.len += right.len
		cur.next = right.next
		syms[nextPos].len = 0
		if right.next >= 0 && int(right.next) < len(syms) {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if rank, n, ok := b.lookup(syms[cur.prev].id, cur.id); ok {
				heap.Push(&h, mergeItem{pos: cur.prev, rank: rank, newID: n})
			}
		}
		if cur.next >= 0 && int(cur.next) < len(syms) {
			if rank, n, ok := b.lookup(cur.id, syms[cur.next].id); ok {
				heap.Push(&h, mergeItem{pos: top.pos, rank: rank, newID: n})
			}
		}
	}
	s.heap = h
}

// maxCachedWord bounds the words the cache keeps (the Rust BPE cache skips long words too).
const maxCachedWord = 256

// wordCache is a bounded word -> ids cache; it only ever changes speed, never results. Reads
// are lock-free (xsync.Map): every pre-tokenized word of every request looks here first.
type wordCache struct {
	m    *xsync.Map[string, []int32]
	size atomic.Int64
}

const cacheCap = 1 << 18

func (c *wordCache) get(s string) ([]int32, bool) {
	return c.m.Load(s)
}

func (c *wordCache) put(s string, ids []int32) {
	// Approximate bound: racing writers may overshoot by a few entries, harmlessly.
	if c.size.Load() >= cacheCap {
		return
	}
	if _, loaded := c.m.LoadOrStore(s, ids); !loaded {
		c.size.Add(1)
	}
}

// byteToRune is GPT-2's bytes_to_unicode table; runeToByte its inverse (-1: not a byte char).
var (
	byteToRune [256]rune
	runeToByte [324]int16
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// byteTokenValue parses ByteFallback's "<0xXX>" form (exactly six bytes, as the Rust decoder).
func byteTokenValue(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}
