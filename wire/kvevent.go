package wire

// The KV-cache events a vLLM engine publishes (vllm/distributed/kv_events.py): a
// KVEventBatch of BlockStored, BlockRemoved and AllBlocksCleared, msgpack-encoded as
// each release's classes declare them. The types here are the union of every
// release's fields; KVEncoding names how one release lays them out. See
// docs/routing.md for what switchyard does with them.

import (
	"encoding/binary"
	"strconv"
)

// KVEncoding is how one vLLM release encodes a KVEventBatch.
type KVEncoding uint8

// The encodings, oldest first. The array encodings only ever append fields, so a
// field sits at the same position in every one of them.
const (
	KVEncodingV011 KVEncoding = iota + 1 // arrays; BlockStored 6 fields (v0.11, v0.12)
	KVEncodingV015                       // arrays; + lora_name (7)
	KVEncodingV018                       // arrays; + extra_keys (8)
	KVEncodingV021                       // arrays; + group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window (11); BlockRemoved + group_idx
	KVEncodingMap                        // newest: maps, tag under "type"
)

var kvEncodingNames = [...]string{KVEncodingV011: "v0.11", KVEncodingV015: "v0.15", KVEncodingV018: "v0.18", KVEncodingV021: "v0.21", KVEncodingMap: "newest"}

// KVEncodingForLayout returns the KV-event encoding of a built-in wire layout
// ("v0.11", "v0.12", "v0.15", "v0.18", "v0.21", "newest", spelt as BuiltinLayout
// accepts them). Any other name (an operator's own layout file says nothing about KV
// events) is false.
func KVEncodingForLayout(layout string) (KVEncoding, bool) {
	l := BuiltinLayout(layout)
	if l == nil {
		return 0, false
	}
	switch l.Name {
	case "v0.11", "v0.12":
		return KVEncodingV011, true
	case "v0.15":
		return KVEncodingV015, true
	case "v0.18":
		return KVEncodingV018, true
	case "v0.21":
		return KVEncodingV021, true
	case "newest":
		return KVEncodingMap, true
	}
	return 0, false
}

// String is the oldest release that encodes this way ("v0.11", "newest").
func (e KVEncoding) String() string {
	if int(e) < len(kvEncodingNames) && kvEncodingNames[e] != "" {
		return kvEncodingNames[e]
	}
	return "KVEncoding(" + strconv.Itoa(int(e)) + ")"
}

// storedFields is the number of BlockStored fields this encoding writes (its array
// holds one more element, the tag).
func (e KVEncoding) storedFields() int {
	switch e {
	case KVEncodingV011:
		return 6
	case KVEncodingV015:
		return 7
	case KVEncodingV018:
		return 8
	}
	return len(kvStoredFields)
}

// removedFields is the number of BlockRemoved fields this encoding writes.
func (e KVEncoding) removedFields() int {
	if e < KVEncodingV021 {
		return 2
	}
	return len(kvRemovedFields)
}

// KVEventKind is an event's class.
type KVEventKind uint8

// The event classes; their names are the tags on the wire.
const (
	KVBlockStored KVEventKind = iota + 1
	KVBlockRemoved
	KVAllBlocksCleared
)

var kvKindNames = [...]string{KVBlockStored: "BlockStored", KVBlockRemoved: "BlockRemoved", KVAllBlocksCleared: "AllBlocksCleared"}

// String is the class name, which is also the tag vLLM writes.
func (k KVEventKind) String() string {
	if k >= KVBlockStored && k <= KVAllBlocksCleared {
		return kvKindNames[k]
	}
	return "KVEventKind(" + strconv.Itoa(int(k)) + ")"
}

// KVBlockHash is vLLM's ExternalBlockHash, used only to apply removals and find
// parents (the index keys blocks by content). An int hash is kept as sent (a negative
// int as its two's-complement bits). A bytes hash (32 bytes when the engine runs with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0, but any length is taken) is folded to 64
// bits by a mixing function seeded with a bytes-only domain constant, so the fold is
// never the integer the bytes spell (b"\x00…\x2a" does not become 42): the two forms
// meet only by chance, at odds of 2^-64 a pair, and one engine sends one form for
// its whole life. Two distinct bytes hashes fold to the same value with odds of
// about 2^-64 a pair: among n live blocks of one engine, n²/2^65 (2.7e-8 for a
// million blocks). A collision could only apply a removal to the wrong block.
type KVBlockHash uint64

// kvBytesDomain seeds the fold of bytes hashes (the fractional digits of the golden
// ratio: any odd constant with mixed bits would do).
const kvBytesDomain = 0x9e3779b97f4a7c15

// KVHashBytes folds a bytes block hash the way the decoder does, so tests and
// callers can name the hash of a known bytes value.
func KVHashBytes(b []byte) KVBlockHash {
	h := uint64(kvBytesDomain) ^ uint64(len(b))*0xff51afd7ed558ccd
	for len(b) >= 8 {
		h = kvMix(h ^ binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) > 0 { // the length is in the seed, so zero padding is unambiguous
		var w uint64
		for i, c := range b {
			w |= uint64(c) << (8 * i)
		}
		h = kvMix(h ^ w)
	}
	return KVBlockHash(kvMix(h))
}

// kvMix is a bijective 64-bit finaliser (xor-shift, multiply): every input bit
// reaches every output bit, and distinct states stay distinct.
func kvMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// KVEvent is one event, the union of every release's fields. A field the sending
// release does not have is left at its zero value (absent).
type KVEvent struct {
	Kind          KVEventKind
	BlockHashes   []KVBlockHash
	Parent        KVBlockHash // parent_block_hash, when HasParent
	HasParent     bool        // false: nil, the first block of a prompt
	TokenIDs      []int64     // BlockSize tokens per block, in order
	BlockSize     int64
	LoRAID        OptInt
	Medium        OptString // absent or nil: vLLM's default
	LoRAName      OptString
	ExtraKeys     []Raw // one raw msgpack value per block (nil entry = None); nil slice = field absent or nil
	GroupIdx      OptInt
	SpecKind      OptString
	SlidingWindow OptInt
}

// KVEventBatch is one published message's payload.
type KVEventBatch struct {
	TS               float64
	Events           []KVEvent
	DataParallelRank OptInt
	// Skipped counts events that were not kept, by reason (unknown tag, wrong field
	// types, token_ids not block_size × len(block_hashes), too many blocks...).
	Skipped [KVSkipReasons]int
}

// KVSkipReason is why the decoder dropped an event.
type KVSkipReason uint8

// The reasons; KVSkipReasons is their count (the length of KVEventBatch.Skipped).
const (
	KVSkipUnknownTag    KVSkipReason = iota // a class this decoder does not know
	KVSkipMalformed                         // not an array or map, no tag, a required field missing
	KVSkipWrongType                         // a field of the wrong msgpack type or out of range
	KVSkipTokenCount                        // token_ids not block_size × len(block_hashes)
	KVSkipTooManyBlocks                     // more blocks than KVBatchDecoder.MaxBlocksPerEvent
	KVSkipExtraKeys                         // extra_keys present but not one entry per block
	KVSkipReasons
)

var kvSkipNames = [KVSkipReasons]string{"unknown_tag", "malformed", "wrong_type", "token_count", "too_many_blocks", "extra_keys"}

// String is a short snake_case name, fit for a metric label.
func (r KVSkipReason) String() string {
	if r < KVSkipReasons {
		return kvSkipNames[r]
	}
	return "KVSkipReason(" + strconv.Itoa(int(r)) + ")"
}

// kvField numbers every event field, in BlockStored's declaration order.
type kvField uint8

const (
	kvHashes kvField = iota
	kvParent
	kvTokens
	kvBlockSize
	kvLoRAID
	kvMedium
	kvLoRAName
	kvExtraKeys
	kvGroupIdx
	kvSpecKind
	kvSlidingWindow
	kvFieldCount
)

var kvFieldNames = [kvFieldCount]string{
	"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
	"lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window",
}

// Each class's fields in declaration order: the positions of the array encodings.
var (
	kvStoredFields  = [...]kvField{kvHashes, kvParent, kvTokens, kvBlockSize, kvLoRAID, kvMedium, kvLoRAName, kvExtraKeys, kvGroupIdx, kvSpecKind, kvSlidingWindow}
	kvRemovedFields = [...]kvField{kvHashes, kvMedium, kvGroupIdx}
)

// The fields every release declares without a default: an event lacking one is
// malformed (a defaulted nil parent would turn a child into a root).
const (
	kvStoredRequired  = 1<<kvHashes | 1<<kvParent | 1<<kvTokens | 1<<kvBlockSize
	kvRemovedRequired = 1 << kvHashes
)

// kvFieldOf maps a map key to the field it names for kind; false for a key the
// class does not declare (ignored, as msgspec ignores unknown keys).
func kvFieldOf(kind KVEventKind, key []byte) (kvField, bool) {
	var f kvField
	switch string(key) {
	case "block_hashes":
		f = kvHashes
	case "parent_block_hash":
		f = kvParent
	case "token_ids":
		f = kvTokens
	case "block_size":
		f = kvBlockSize
	case "lora_id":
		f = kvLoRAID
	case "medium":
		f = kvMedium
	case "lora_name":
		f = kvLoRAName
	case "extra_keys":
		f = kvExtraKeys
	case "group_idx":
		f = kvGroupIdx
	case "kv_cache_spec_kind":
		f = kvSpecKind
	case "kv_cache_spec_sliding_window":
		f = kvSlidingWindow
	default:
		return 0, false
	}
	if kind == KVBlockRemoved {
		return f, f == kvHashes || f == kvMedium || f == kvGroupIdx
	}
	return f, kind == KVBlockStored
}

// kvKindOf maps a tag to its class.
func kvKindOf(tag []byte) (KVEventKind, bool) {
	switch string(tag) {
	case "BlockStored":
		return KVBlockStored, true
	case "BlockRemoved":
		return KVBlockRemoved, true
	case "AllBlocksCleared":
		return KVAllBlocksCleared, true
	}
	return 0, false
}
