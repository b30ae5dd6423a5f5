package kvindex

import "math/bits"

// keyer derives content keys. A block's key mixes its parent's key, a hash of its
// token ids and a hash of its extra identity (the raw extra_keys entry, the LoRA
// name). None of it is vLLM's hash: that one depends on PYTHONHASHSEED, the hash
// algorithm and the release, while the tokens and extra keys are in the events.
type keyer struct {
	seed uint64
	s    [14]uint64 // secrets derived from seed, one per mixing step
	pos  []uint64   // per-position whitening of token ids, grown to the largest block
}

func newKeyer(seed uint64) keyer {
	k := keyer{seed: seed}
	for i := range k.s {
		k.s[i] = splitmix(seed + uint64(i+1)*0x9e3779b97f4a7c15)
	}
	return k
}

// splitmix is SplitMix64's finaliser: a bijection that spreads every input bit.
func splitmix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// mum folds the 128-bit product of a and b; one multiply mixes 128 input bits.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// reserve makes the position keys cover blocks of n tokens.
func (k *keyer) reserve(n int) {
	for i := len(k.pos); i < n; i++ {
		k.pos = append(k.pos, splitmix(k.seed^uint64(i+1)*0xd6e8feb86659fd93))
	}
}

// tokens hashes one block's token ids with NH, the hash of UMAC: ids are added to
// keys that depend on their position and multiplied in pairs, the products summed.
// The products do not depend on each other, so the CPU runs them in parallel, and
// order matters because every position has its own key. For two different blocks,
// the chance of equal sums is at most 2^-32 (NH's bound), and a false match also
// needs the same parent: one lookup in ten million meets one at a thousand indexed
// siblings, and then counts one block too many. The caller has reserved len(t)
// positions.
func (k *keyer) tokens(t []int64) uint64 {
	p := k.pos[:len(t)]
	var acc uint64
	for len(t) >= 16 { // unrolled, without bounds checks
		acc += nh16((*[16]int64)(t), (*[16]uint64)(p))
		t, p = t[16:], p[16:]
	}
	for i := range t {
		acc += mum(uint64(t[i])^p[i], k.s[0]+uint64(i))
	}
	return acc
}

// nh16 hashes 16 ids. Token ids are below 2^32 in every vocabulary; a block with an
// id outside [0, 2^32), which NH's 32-bit lanes would truncate, is hashed whole by
// nh16Wide instead.
func nh16(t *[16]int64, p *[16]uint64) uint64 {
	or := t[0] | t[1] | t[2] | t[3] | t[4] | t[5] | t[6] | t[7] |
		t[8] | t[9] | t[10] | t[11] | t[12] | t[13] | t[14] | t[15]
	if uint64(or)>>32 != 0 {
		return nh16Wide(t, p)
	}
	nh := func(i int) uint64 {
		return uint64(uint32(t[i])+uint32(p[i])) * uint64(uint32(t[i+1])+uint32(p[i+1]))
	}
	return nh(0) + nh(2) + nh(4) + nh(6) + nh(8) + nh(10) + nh(12) + nh(14)
}

// nh16Wide hashes 16 ids of any value, one 128-bit product per pair.
func nh16Wide(t *[16]int64, p *[16]uint64) uint64 {
	a := mum(uint64(t[0])^p[0], uint64(t[1])^p[1]) + mum(uint64(t[2])^p[2], uint64(t[3])^p[3])
	b := mum(uint64(t[4])^p[4], uint64(t[5])^p[5]) + mum(uint64(t[6])^p[6], uint64(t[7])^p[7])
	c := mum(uint64(t[8])^p[8], uint64(t[9])^p[9]) + mum(uint64(t[10])^p[10], uint64(t[11])^p[11])
	d := mum(uint64(t[12])^p[12], uint64(t[13])^p[13]) + mum(uint64(t[14])^p[14], uint64(t[15])^p[15])
	return a + b + c + d
}

// chain fills out with the keys of the len(out) blocks of size bs at the start of t
// under parent, the first with extra e0, the others with extra e, and returns the
// last. A prompt's blocks are keyed here, with vLLM's default size unrolled.
func (k *keyer) chain(t []int64, bs int, parent, e0, e uint64, out []uint64) uint64 {
	if bs == 16 {
		p := (*[16]uint64)(k.pos)
		for j := range out {
			parent = k.block(parent, nh16((*[16]int64)(t[j*16:]), p), e0)
			out[j], e0 = parent, e
		}
		return parent
	}
	for j := range out {
		parent = k.block(parent, k.tokens(t[j*bs:(j+1)*bs]), e0)
		out[j], e0 = parent, e
	}
	return parent
}

// root is the parent key of a chain's first block; the block size is in it, so
// chains of different sizes never share keys.
func (k *keyer) root(blockSize int) uint64 {
	return mum(k.s[1]^uint64(blockSize), k.s[2])
}

// block is the content key of a block under parent; never 0, the key of a free slot.
func (k *keyer) block(parent, tok, extra uint64) uint64 {
	x := mum(parent^k.s[3], tok^k.s[4])
	if x = mum(x^k.s[5], extra^k.s[6]); x == 0 {
		return 1
	}
	return x
}

// extraIdentity is what a block adds to its tokens: the raw msgpack of its
// extra_keys entry (nil: None) and the LoRA adapter. loraID > 0 with no name is a
// v0.11/v0.12 event: it gets an identity no prompt lookup produces (see loraByID).
type extraIdentity struct {
	raw    []byte
	lora   string
	loraID int64
	byID   bool
}

// extra hashes an extraIdentity; 0 when there is none, the common case.
func (k *keyer) extra(e extraIdentity) uint64 {
	var h uint64
	if e.raw != nil {
		h = hashBytes(e.raw, k.s[7])
	}
	if e.lora != "" {
		h = mum(h^k.s[8], hashBytes(e.lora, k.s[9]))
	}
	if e.byID {
		h = mum(h^k.s[10], uint64(e.loraID)^k.s[11])
	}
	return h
}

// hashBytes is a small keyed hash for extra keys and LoRA names (tens of bytes).
func hashBytes[T ~string | ~[]byte](b T, seed uint64) uint64 {
	h := seed ^ uint64(len(b))*0x9e3779b97f4a7c15
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
			uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
		h = mum(h^w, 0xa0761d6478bd642f)
	}
	var w uint64
	for j := 0; i < len(b); i, j = i+1, j+8 {
		w |= uint64(b[i]) << j
	}
	return mum(h^w, 0xe7037ed1a0b428db)
}

// fastrange maps a 64-bit hash onto [0, n) with one multiply, so tables need not be
// powers of two and can be sized to their cap.
func fastrange(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}
