package kvindex

// What vLLM puts in a block's extra keys, and so in its block hash
// (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys):
//
//	lora_extra_keys + mm_extra_keys + cache_salt_keys + prompt_embeds_keys
//
// as a tuple, or None when all are empty:
//
//   - _gen_lora_extra_hash_keys: [lora_request.lora_name] for a LoRA request, on
//     every block (v0.11 put lora_int_id there instead; v0.12 has the name);
//   - _gen_mm_extra_hash_keys: one (mm identifier, offset of the item from the
//     block's start) per multimodal item overlapping the block;
//   - the cache salt, on the block starting at token 0 only, and only when it is
//     truthy (an empty salt adds nothing);
//   - _gen_prompt_embeds_extra_hash_keys: a sha256 of the block's prompt embeddings.
//
// From v0.18, BlockPool.cache_full_blocks (vllm/v1/core/block_pool.py) calls
// generate_block_hash_extra_keys once per stored block and sends the list as
// BlockStored.extra_keys, one entry per block hash, beside lora_id and lora_name;
// msgspec encodes a tuple as a msgpack array and None as nil. The lookup side below
// rebuilds those bytes for a text prompt, so a prompt and an event key a block alike.
// It cannot rebuild multimodal or prompt-embedding keys: the edge sets Query.StopAt
// to the first token such a key covers, and the lookup stops before that block.

// appendStr appends s as msgspec writes a str: fixstr, str8, str16 or str32.
func appendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 1<<8:
		dst = append(dst, 0xd9, byte(n))
	case n < 1<<16:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

// appendPromptExtra appends the msgpack of the extra_keys entry vLLM would send for
// a text prompt's block (first: the block at token 0) and reports false for None.
func appendPromptExtra(dst []byte, lora, salt string, first bool) ([]byte, bool) {
	n := 0
	if lora != "" {
		n++
	}
	if first && salt != "" {
		n++
	}
	if n == 0 {
		return dst, false
	}
	dst = append(dst, 0x90|byte(n))
	if lora != "" {
		dst = appendStr(dst, lora)
	}
	if first && salt != "" {
		dst = appendStr(dst, salt)
	}
	return dst, true
}

// isNone reports whether a raw extra_keys entry is msgpack nil (or absent).
func isNone(raw []byte) bool {
	return len(raw) == 0 || len(raw) == 1 && raw[0] == 0xc0
}

// queryExtras are a prompt's two extra identities: its first block's and the rest's.
type queryExtras struct {
	first, rest uint64
}

// promptExtras hashes the extras a prompt's blocks carry. buf is scratch.
func (k *keyer) promptExtras(q *Query, buf []byte) (queryExtras, []byte) {
	salt := ""
	if q.HasSalt {
		salt = q.CacheSalt
	}
	var e queryExtras
	buf, ok := appendPromptExtra(buf[:0], q.LoRAName, salt, true)
	e.first = k.extra(extraIdentity{raw: rawIf(buf, ok), lora: q.LoRAName})
	buf, ok = appendPromptExtra(buf[:0], q.LoRAName, salt, false)
	e.rest = k.extra(extraIdentity{raw: rawIf(buf, ok), lora: q.LoRAName})
	return e, buf
}

func rawIf(b []byte, ok bool) []byte {
	if !ok {
		return nil
	}
	return b
}

// eventExtra returns block i's extra identity from a Stored event. When the release
// sends no extra_keys (v0.11 to v0.15) it is derived as vLLM hashed it:
//
//   - v0.15 sends lora_name: the entry is [lora_name] on every block, as v0.18
//     would have sent it, so such blocks match LoRA prompts. A cache salt cannot be
//     seen: a salted request's blocks look unsalted (see the README).
//   - v0.11 and v0.12 send lora_id only: the identity is the id, which no lookup
//     produces (a prompt names its adapter, and the id is the engine's own counter),
//     so LoRA blocks of those releases never match. Predicting too few hits is safe.
func eventExtra(s *Stored, i int, buf []byte) (extraIdentity, []byte) {
	lora := ""
	if s.HasLoRAName {
		lora = s.LoRAName
	}
	if s.Extra != nil {
		raw := s.Extra[i]
		if isNone(raw) {
			raw = nil
		}
		return extraIdentity{raw: raw, lora: lora}, buf
	}
	if lora != "" {
		buf, _ = appendPromptExtra(buf[:0], lora, "", false)
		return extraIdentity{raw: buf, lora: lora}, buf
	}
	if s.HasLoRAID && s.LoRAID != 0 {
		return extraIdentity{loraID: s.LoRAID, byID: true}, buf
	}
	return extraIdentity{}, buf
}
