package wire

// Encoding a KVEventBatch as a vLLM release's publisher does
// (msgspec.msgpack.Encoder().encode(batch)), for the mock engine and the tests.
//
// What omit_defaults does differs between the two shapes, and the golden payloads
// show it: the array encodings (array_like classes, v0.11 to v0.21) write every
// field, trailing nils included, because msgspec does not omit defaults from
// array-like structs. The map encoding (newest) drops a key whose class declares a
// default (data_parallel_rank, extra_keys, group_idx, kv_cache_spec_kind,
// kv_cache_spec_sliding_window) when its value is that default, None; the fields
// declared without one (lora_id, medium, lora_name...) are always written, nil or not.

// AppendKVEventBatch appends b encoded as release enc encodes it: byte-exact with
// msgspec for that release, for every batch that release can carry. Fields enc does
// not have are dropped; every block hash is written as the unsigned int it holds (a
// bytes hash was folded on decoding, its bytes are gone; vLLM's int hashes are
// unsigned 64-bit, so theirs come out as sent). Events of an unknown Kind are not
// written. An enc that is not one of the KVEncoding constants is written as the
// newest (map) encoding.
func AppendKVEventBatch(dst []byte, enc KVEncoding, b *KVEventBatch) []byte {
	if enc < KVEncodingV011 || enc >= KVEncodingMap {
		return appendKVBatchMap(dst, b)
	}
	dst = appendArrayHeader(dst, 3)
	dst = appendFloat(dst, b.TS)
	dst = appendArrayHeader(dst, kvWritable(b.Events))
	for i := range b.Events {
		dst = appendKVEventArray(dst, enc, &b.Events[i])
	}
	return appendOptInt(dst, b.DataParallelRank)
}

// kvWritable counts the events of a known kind.
func kvWritable(evs []KVEvent) int {
	n := 0
	for i := range evs {
		if k := evs[i].Kind; k >= KVBlockStored && k <= KVAllBlocksCleared {
			n++
		}
	}
	return n
}

// appendKVEventArray writes [tag, field...] with every field enc declares.
func appendKVEventArray(dst []byte, enc KVEncoding, e *KVEvent) []byte {
	var fields []kvField
	switch e.Kind {
	case KVBlockStored:
		fields = kvStoredFields[:enc.storedFields()]
	case KVBlockRemoved:
		fields = kvRemovedFields[:enc.removedFields()]
	case KVAllBlocksCleared:
	default:
		return dst
	}
	dst = appendArrayHeader(dst, 1+len(fields))
	dst = appendStr(dst, kvKindNames[e.Kind])
	for _, f := range fields {
		dst = appendKVField(dst, e, f)
	}
	return dst
}

// appendKVBatchMap writes the newest encoding: {"ts", "events"[, "data_parallel_rank"]}.
func appendKVBatchMap(dst []byte, b *KVEventBatch) []byte {
	n := 2
	if b.DataParallelRank.Valid {
		n++
	}
	dst = appendMapHeader(dst, n)
	dst = appendFloat(appendStr(dst, "ts"), b.TS)
	dst = appendArrayHeader(appendStr(dst, "events"), kvWritable(b.Events))
	for i := range b.Events {
		dst = appendKVEventMap(dst, &b.Events[i])
	}
	if b.DataParallelRank.Valid {
		dst = appendInt(appendStr(dst, "data_parallel_rank"), b.DataParallelRank.Value)
	}
	return dst
}

// appendKVEventMap writes {"type": tag, field: value...}: the fields declared
// without a default always, the defaulted ones only when set.
func appendKVEventMap(dst []byte, e *KVEvent) []byte {
	var fields []kvField
	switch e.Kind {
	case KVBlockStored:
		fields = kvStoredFields[:]
	case KVBlockRemoved:
		fields = kvRemovedFields[:]
	case KVAllBlocksCleared:
	default:
		return dst
	}
	n := 1
	for _, f := range fields {
		if !kvOmitted(e, f) {
			n++
		}
	}
	dst = appendMapHeader(dst, n)
	dst = appendStr(appendStr(dst, "type"), kvKindNames[e.Kind])
	for _, f := range fields {
		if !kvOmitted(e, f) {
			dst = appendKVField(appendStr(dst, kvFieldNames[f]), e, f)
		}
	}
	return dst
}

// kvOmitted reports a field the newest classes declare with a default of None,
// holding None: omit_defaults leaves its key out.
func kvOmitted(e *KVEvent, f kvField) bool {
	switch f {
	case kvExtraKeys:
		return e.ExtraKeys == nil
	case kvGroupIdx:
		return !e.GroupIdx.Valid
	case kvSpecKind:
		return !e.SpecKind.Valid
	case kvSlidingWindow:
		return !e.SlidingWindow.Valid
	}
	return false
}

// appendKVField writes one field's value.
func appendKVField(dst []byte, e *KVEvent, f kvField) []byte {
	switch f {
	case kvHashes:
		dst = appendArrayHeader(dst, len(e.BlockHashes))
		for _, h := range e.BlockHashes {
			dst = appendUint(dst, uint64(h))
		}
		return dst
	case kvParent:
		if !e.HasParent {
			return appendNil(dst)
		}
		return appendUint(dst, uint64(e.Parent))
	case kvTokens:
		return appendInts(dst, e.TokenIDs)
	case kvBlockSize:
		return appendInt(dst, e.BlockSize)
	case kvLoRAID:
		return appendOptInt(dst, e.LoRAID)
	case kvMedium:
		return appendOptStr(dst, e.Medium)
	case kvLoRAName:
		return appendOptStr(dst, e.LoRAName)
	case kvExtraKeys:
		return appendKVExtraKeys(dst, e.ExtraKeys)
	case kvGroupIdx:
		return appendOptInt(dst, e.GroupIdx)
	case kvSpecKind:
		return appendOptStr(dst, e.SpecKind)
	case kvSlidingWindow:
		return appendOptInt(dst, e.SlidingWindow)
	}
	return appendNil(dst)
}

// appendKVExtraKeys writes nil for an absent list, else one raw value per block.
func appendKVExtraKeys(dst []byte, keys []Raw) []byte {
	if keys == nil {
		return appendNil(dst)
	}
	dst = appendArrayHeader(dst, len(keys))
	for _, k := range keys {
		dst = appendRaw(dst, k)
	}
	return dst
}
