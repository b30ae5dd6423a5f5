package wire

import "slices"

// Decoding KV-event batches, the ingest hot path of cache-aware routing: every
// engine publishes a batch per scheduler step. The decoder keeps every slice it
// hands out in scratch it reuses (all events' hashes back to back, likewise their
// tokens and extra keys), so a steady stream of batches decodes without allocating.

// DefaultKVMaxBlocksPerEvent bounds the blocks one event may name when
// KVBatchDecoder.MaxBlocksPerEvent is 0: a 128k-token prompt in blocks of 16 is
// 8,192; this leaves room for block size 1 up to 64k tokens.
const DefaultKVMaxBlocksPerEvent = 1 << 16

// KV string interning: medium, lora_name and kv_cache_spec_kind repeat in every
// event, so the decoder keeps the first kvMaxNames distinct short ones and hands out
// the same string again. A flood of distinct names just allocates, as it would
// without the table; the table itself stays bounded.
const (
	kvMaxNames   = 256
	kvMaxNameLen = 64
)

// KVBatchDecoder decodes payloads, reusing its batch, events and their slices across
// calls: the returned batch is valid until the next Decode. ExtraKeys entries alias
// the payload; strings do not. Not safe for concurrent use; one per subscriber loop.
//
// It is lenient as msgspec is: an event array of any of the known lengths (shorter:
// trailing fields default; longer: extra elements ignored), maps with unknown keys
// ignored, int or bytes hashes, events as arrays [tag, field...] or maps
// {"type": tag, ...}, in any mix. An event that does not decode (unknown tag, wrong
// types, mismatched token count) is skipped and counted in Skipped; the batch goes on
// when the event's extent can be stepped over. A payload that is not a batch at all
// (or ends inside one) is an error. Every length is checked against the bytes left
// before anything is allocated, so a hostile payload costs O(len(payload)) memory.
type KVBatchDecoder struct {
	// MaxBlocksPerEvent bounds len(block_hashes) of one event; an event naming more
	// is skipped (KVSkipTooManyBlocks). 0 means DefaultKVMaxBlocksPerEvent.
	MaxBlocksPerEvent int

	batch  KVEventBatch
	hashes []KVBlockHash // every kept event's block hashes, back to back
	tokens []int64       // likewise token ids
	extra  []Raw         // likewise extra keys
	spans  []kvSpan      // where each kept event's slices sit in the scratch
	names  map[string]string
}

// kvSpan locates one event's slices in the decoder's scratch; extra0 < 0 means
// extra_keys was absent or nil.
type kvSpan struct {
	hash0, hash1, tok0, tok1, extra0, extra1 int
}

// kvSkip is an event-level failure that names its reason; any other error inside
// an event counts as KVSkipWrongType.
type kvSkip KVSkipReason

func (s kvSkip) Error() string { return "wire: KV event skipped: " + KVSkipReason(s).String() }

// Decode decodes one payload. On error the batch is nil.
func (d *KVBatchDecoder) Decode(payload []byte) (*KVEventBatch, error) {
	const typ = "KVEventBatch"
	d.reset()
	r := reader{b: payload}
	var err error
	switch r.peek() {
	case kindArray:
		err = d.batchArray(&r)
	case kindMap:
		err = d.batchMap(&r)
	default:
		err = r.expected("array or map")
	}
	if err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes after the batch"}
	}
	if err != nil {
		d.batch.Events = d.batch.Events[:0]
		return nil, fieldErr(err, typ, "")
	}
	d.publish()
	return &d.batch, nil
}

// reset empties the batch and scratch, keeping their capacity.
func (d *KVBatchDecoder) reset() {
	d.batch = KVEventBatch{Events: d.batch.Events}
	d.resetEvents()
}

// resetEvents empties the event list and scratch, keeping their capacity.
func (d *KVBatchDecoder) resetEvents() {
	d.batch.Events = d.batch.Events[:0]
	d.hashes, d.tokens, d.extra, d.spans = d.hashes[:0], d.tokens[:0], d.extra[:0], d.spans[:0]
}

// batchArray reads [ts, events, data_parallel_rank]; the rank is optional and
// elements past it are ignored.
func (d *KVBatchDecoder) batchArray(r *reader) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	if n < 2 {
		return r.errorf("expected at least 2 fields (ts, events), got " + itoa(n))
	}
	if d.batch.TS, err = r.float(); err != nil {
		return fieldErr(err, "KVEventBatch", "ts")
	}
	if err = d.events(r); err != nil {
		return fieldErr(err, "KVEventBatch", "events")
	}
	if n > 2 {
		if d.batch.DataParallelRank, err = r.optInt(); err != nil {
			return fieldErr(err, "KVEventBatch", "data_parallel_rank")
		}
	}
	return r.skipRest(n - 3)
}

// batchMap reads {"ts", "events", "data_parallel_rank"}; ts and events are required,
// other keys ignored.
func (d *KVBatchDecoder) batchMap(r *reader) error {
	n, err := r.mapHeader()
	if err != nil {
		return err
	}
	var haveTS, haveEvents bool
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return err
		}
		switch string(k) {
		case "ts":
			d.batch.TS, err = r.float()
			haveTS = true
		case "events":
			d.resetEvents() // a repeated key replaces the list, as it does in Python
			err = d.events(r)
			haveEvents = true
		case "data_parallel_rank":
			d.batch.DataParallelRank, err = r.optInt()
		default:
			err = r.skip()
		}
		if err != nil {
			return fieldErr(err, "KVEventBatch", string(k))
		}
	}
	if !haveTS || !haveEvents {
		return r.errorf("a batch needs ts and events")
	}
	return nil
}

// kvMinEventSize is the fewest bytes a kept event takes: ["BlockRemoved", []].
// kvPresize bounds the events sized for up front: far more than a step publishes,
// few enough that a header of junk does not leave the decoder holding megabytes.
const (
	kvMinEventSize = 15
	kvPresize      = 1024
)

// events reads the event list, keeping what decodes and counting what does not.
func (d *KVBatchDecoder) events(r *reader) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	// Sized once from the header rather than grown by copying ever larger arrays of
	// 200-byte events.
	want := min(r.capFor(n, kvMinEventSize), kvPresize)
	d.batch.Events = slices.Grow(d.batch.Events, want)
	d.spans = slices.Grow(d.spans, want)
	for range n {
		if err := d.event(r); err != nil {
			return err
		}
	}
	return nil
}

// event reads one event. One that does not decode is rolled back, counted and
// stepped over; only an extent that cannot be stepped over is an error.
func (d *KVBatchDecoder) event(r *reader) error {
	start := r.off
	nh, nt, nx := len(d.hashes), len(d.tokens), len(d.extra)
	d.batch.Events = append(d.batch.Events, KVEvent{})
	e := &d.batch.Events[len(d.batch.Events)-1]
	sp := kvSpan{hash0: nh, hash1: nh, tok0: nt, tok1: nt, extra0: -1}
	var err error
	switch r.peek() {
	case kindArray:
		err = d.eventArray(r, e, &sp)
	case kindMap:
		err = d.eventMap(r, e, &sp)
	default:
		err = kvSkip(KVSkipMalformed)
	}
	if err == nil {
		err = d.check(e, &sp)
	}
	if err == nil {
		d.spans = append(d.spans, sp)
		return nil
	}
	d.batch.Events = d.batch.Events[:len(d.batch.Events)-1]
	d.hashes, d.tokens, d.extra = d.hashes[:nh], d.tokens[:nt], d.extra[:nx]
	reason := KVSkipWrongType
	if s, ok := err.(kvSkip); ok {
		reason = KVSkipReason(s)
	}
	d.batch.Skipped[reason]++
	r.off = start
	return r.skip()
}

// eventArray reads [tag, field...]: fields by position, the required ones present.
func (d *KVBatchDecoder) eventArray(r *reader, e *KVEvent, sp *kvSpan) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	if n == 0 {
		return kvSkip(KVSkipMalformed)
	}
	if e.Kind, err = d.tag(r); err != nil {
		return err
	}
	fields, required := kvFieldsOf(e.Kind)
	var seen uint32
	for i := range n - 1 {
		if i >= len(fields) {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if err := d.field(r, e, sp, fields[i]); err != nil {
			return err
		}
		seen |= 1 << fields[i]
	}
	if seen&required != required {
		return kvSkip(KVSkipMalformed)
	}
	return nil
}

// eventMap reads {"type": tag, field: value...}. The tag is usually the first key;
// when it is not, the map is read twice: once to find it, once for the fields.
func (d *KVBatchDecoder) eventMap(r *reader, e *KVEvent, sp *kvSpan) error {
	n, err := r.mapHeader()
	if err != nil {
		return err
	}
	first := r.off
	at := -1
	for i := range n {
		k, err := r.strBytes()
		if err != nil {
			return kvSkip(KVSkipMalformed) // msgspec's struct keys are strs
		}
		if string(k) == "type" {
			at = i
			if e.Kind, err = d.tag(r); err != nil {
				return err
			}
			break
		}
		if err := r.skip(); err != nil {
			return err
		}
	}
	if at < 0 {
		return kvSkip(KVSkipMalformed)
	}
	left := n - 1
	if at > 0 {
		r.off, left = first, n
	}
	_, required := kvFieldsOf(e.Kind)
	var seen uint32
	for range left {
		k, err := r.strBytes()
		if err != nil {
			return kvSkip(KVSkipMalformed)
		}
		f, known := kvFieldOf(e.Kind, k)
		if !known { // "type" itself, when it was not first, or a key of a newer release
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if err := d.field(r, e, sp, f); err != nil {
			return err
		}
		seen |= 1 << f
	}
	if seen&required != required {
		return kvSkip(KVSkipMalformed)
	}
	return nil
}

// tag reads an event's class name.
func (d *KVBatchDecoder) tag(r *reader) (KVEventKind, error) {
	t, err := r.strBytes()
	if err != nil {
		return 0, kvSkip(KVSkipMalformed)
	}
	k, ok := kvKindOf(t)
	if !ok {
		return 0, kvSkip(KVSkipUnknownTag)
	}
	return k, nil
}

// kvFieldsOf returns a class's fields in order and the mask of the required ones.
func kvFieldsOf(k KVEventKind) ([]kvField, uint32) {
	switch k {
	case KVBlockStored:
		return kvStoredFields[:], kvStoredRequired
	case KVBlockRemoved:
		return kvRemovedFields[:], kvRemovedRequired
	}
	return nil, 0
}

// check enforces what the index relies on: the block cap, token_ids covering the
// blocks exactly, extra_keys one per block.
func (d *KVBatchDecoder) check(e *KVEvent, sp *kvSpan) error {
	blocks := sp.hash1 - sp.hash0
	if blocks > d.maxBlocks() {
		return kvSkip(KVSkipTooManyBlocks)
	}
	if e.Kind != KVBlockStored {
		return nil
	}
	tokens := int64(sp.tok1 - sp.tok0)
	// Both counts are bounded by the payload's length, so the product cannot overflow
	// once block_size is known to be at most the token count.
	if blocks == 0 && tokens != 0 ||
		blocks > 0 && (e.BlockSize <= 0 || e.BlockSize > tokens || e.BlockSize*int64(blocks) != tokens) {
		return kvSkip(KVSkipTokenCount)
	}
	if sp.extra0 >= 0 && sp.extra1-sp.extra0 != blocks {
		return kvSkip(KVSkipExtraKeys)
	}
	return nil
}

func (d *KVBatchDecoder) maxBlocks() int {
	if d.MaxBlocksPerEvent > 0 {
		return d.MaxBlocksPerEvent
	}
	return DefaultKVMaxBlocksPerEvent
}

// field reads one field's value into e (or, for the lists, into the scratch at sp).
func (d *KVBatchDecoder) field(r *reader, e *KVEvent, sp *kvSpan, f kvField) error {
	var err error
	switch f {
	case kvHashes:
		return d.hashList(r, sp)
	case kvParent:
		e.HasParent = !r.nextNil()
		if e.HasParent {
			e.Parent, err = r.kvHash()
		}
	case kvTokens:
		return d.tokenList(r, sp)
	case kvBlockSize:
		e.BlockSize, err = r.int()
	case kvLoRAID:
		e.LoRAID, err = r.optInt()
	case kvMedium:
		e.Medium, err = d.optName(r)
	case kvLoRAName:
		e.LoRAName, err = d.optName(r)
	case kvExtraKeys:
		return d.extraKeys(r, sp)
	case kvGroupIdx:
		e.GroupIdx, err = r.optInt()
	case kvSpecKind:
		e.SpecKind, err = d.optName(r)
	case kvSlidingWindow:
		e.SlidingWindow, err = r.optInt()
	}
	return err
}

// hashList reads [hash...] into the scratch. A list longer than the block cap is
// refused from its header, before anything is stored.
func (d *KVBatchDecoder) hashList(r *reader, sp *kvSpan) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	if n > d.maxBlocks() {
		return kvSkip(KVSkipTooManyBlocks)
	}
	sp.hash0 = len(d.hashes)
	d.hashes = slices.Grow(d.hashes, n)
	for range n {
		h, err := r.kvHash()
		if err != nil {
			return err
		}
		d.hashes = append(d.hashes, h)
	}
	sp.hash1 = len(d.hashes)
	return nil
}

// kvHash reads an ExternalBlockHash: an int (kept as its bits) or bytes (folded).
func (r *reader) kvHash() (KVBlockHash, error) {
	if r.off < len(r.b) {
		switch c := r.b[r.off]; {
		case c <= 0x7f:
			r.off++
			return KVBlockHash(c), nil
		case c == 0xcf && r.need(9):
			r.off++
			return KVBlockHash(r.u64()), nil
		case c >= 0xc4 && c <= 0xc6:
			b, err := r.bin()
			return KVHashBytes(b), err
		}
	}
	v, _, err := r.intRaw()
	return KVBlockHash(v), err
}

// tokenList reads [int...] into the scratch. Token ids are most of a batch's bytes,
// so the forms a vocabulary's ids take are read inline, straight into place;
// anything else takes the general path.
func (d *KVBatchDecoder) tokenList(r *reader, sp *kvSpan) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	sp.tok0 = len(d.tokens)
	toks := slices.Grow(d.tokens, n)[:sp.tok0+n]
	dst := toks[sp.tok0:]
	b, off := r.b, r.off
	for i := range dst {
		c := byte(0xc1) // past the end: the general path reports it
		if off < len(b) {
			c = b[off]
		}
		switch {
		case c <= 0x7f:
			dst[i] = int64(c)
			off++
		case c == 0xcd && off+3 <= len(b):
			dst[i] = int64(b[off+1])<<8 | int64(b[off+2])
			off += 3
		case c == 0xce && off+5 <= len(b):
			dst[i] = int64(b[off+1])<<24 | int64(b[off+2])<<16 | int64(b[off+3])<<8 | int64(b[off+4])
			off += 5
		default:
			r.off = off
			if dst[i], err = r.int(); err != nil {
				d.tokens = toks[:sp.tok0]
				return err
			}
			off = r.off
		}
	}
	r.off = off
	d.tokens = toks
	sp.tok1 = len(toks)
	return nil
}

// extraKeys reads nil or [entry...], each entry a tuple (array) or nil, kept raw.
func (d *KVBatchDecoder) extraKeys(r *reader, sp *kvSpan) error {
	if r.nextNil() {
		sp.extra0 = -1
		return nil
	}
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	sp.extra0 = len(d.extra)
	d.extra = slices.Grow(d.extra, n)
	for range n {
		v, err := r.rawOf(kindArray)
		if err != nil {
			return err
		}
		d.extra = append(d.extra, v)
	}
	sp.extra1 = len(d.extra)
	return nil
}

// optName reads str | nil, interning short strings so repeated names do not
// allocate.
func (d *KVBatchDecoder) optName(r *reader) (OptString, error) {
	if r.nextNil() {
		return OptString{}, nil
	}
	b, err := r.strBytes()
	if err != nil {
		return OptString{}, err
	}
	switch string(b) { // the values nearly every event carries
	case "GPU":
		return OptString{Value: "GPU", Valid: true}, nil
	case "CPU":
		return OptString{Value: "CPU", Valid: true}, nil
	}
	if s, ok := d.names[string(b)]; ok {
		return OptString{Value: s, Valid: true}, nil
	}
	s := string(b)
	if len(d.names) < kvMaxNames && len(s) <= kvMaxNameLen {
		if d.names == nil {
			d.names = make(map[string]string)
		}
		d.names[s] = s
	}
	return OptString{Value: s, Valid: true}, nil
}

// publish points every kept event's slices at the scratch, now that it no longer
// grows.
func (d *KVBatchDecoder) publish() {
	for i := range d.batch.Events {
		e, sp := &d.batch.Events[i], d.spans[i]
		if e.Kind == KVAllBlocksCleared {
			continue
		}
		e.BlockHashes = d.hashes[sp.hash0:sp.hash1:sp.hash1]
		if e.Kind == KVBlockStored {
			e.TokenIDs = d.tokens[sp.tok0:sp.tok1:sp.tok1]
		}
		if sp.extra0 >= 0 {
			e.ExtraKeys = d.extra[sp.extra0:sp.extra1:sp.extra1]
			if e.ExtraKeys == nil {
				e.ExtraKeys = []Raw{} // [] on the wire: present, not absent
			}
		}
	}
}
