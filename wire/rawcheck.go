package wire

// Checks of the fields we carry undecoded (Raw). The engine decodes each with its
// declared type (vllm/sampling_params.py, vllm/v1/engine/__init__.py) inside
// add_request_decoder.decode, where a type error or a raising __post_init__ kills
// the input thread; so each Raw field is checked against that type here. Every
// check is a bounds-checked read: a malformed Raw is an error, never a panic.

import "math"

// checkAny checks one value the engine decodes untyped (Any, or the values of a
// dict): every str valid UTF-8 (msgspec makes it a Python str), every ext code 3
// (the decoder's ext_hook raises on anything else unless the engine runs with
// VLLM_ALLOW_INSECURE_SERIALIZATION), and every map key a scalar. A map key that is
// an array, a map or an ext is refused because whether msgspec can hash it is not
// something we can vouch for. It walks with an explicit stack, so nesting depth
// cannot exhaust the goroutine stack.
func checkAny(v Raw) string {
	if len(v) == 0 {
		return ""
	}
	type level struct {
		left  int  // values still to read at this level
		isMap bool // entries alternate key, value
		key   bool // the next value is a key
	}
	r := reader{b: v, text: true}
	stack := []level{{left: 1}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.left == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		top.left--
		isKey := top.isMap && top.key
		if top.isMap {
			top.key = !top.key
		}
		if r.done() {
			return "truncated msgpack value"
		}
		switch kindOf(r.b[r.off]) {
		case kindArray, kindMap, kindExt:
			if isKey {
				return "map key of type " + kindOf(r.b[r.off]).String() + " (only scalar keys are accepted)"
			}
		}
		switch kindOf(r.b[r.off]) {
		case kindArray:
			n, err := r.arrayHeader()
			if err != nil {
				return err.(*DecodeError).Msg
			}
			stack = append(stack, level{left: n})
		case kindMap:
			n, err := r.mapHeader()
			if err != nil {
				return err.(*DecodeError).Msg
			}
			stack = append(stack, level{left: 2 * n, isMap: true, key: true})
		case kindExt:
			code, _, err := r.ext()
			if err != nil {
				return err.(*DecodeError).Msg
			}
			if code != extRawView {
				return "ext type " + itoa(int(code)) + " (the engine accepts only 3, raw bytes, without insecure serialization)"
			}
		default: // scalars, str (UTF-8 checked by the text reader), or 0xc1
			if err := r.skip(); err != nil {
				return err.(*DecodeError).Msg
			}
		}
	}
	if !r.done() {
		return "trailing bytes after the value"
	}
	return ""
}

// eachField calls f for every entry of the map m with the reader at the value; f
// must consume the value (read it or skip it). Keys must be strs. A nil m (msgpack
// nil) has no entries. Errors name the field as prefix.key.
func eachField(prefix string, m Raw, f func(key string, r *reader) string) error {
	if len(m) == 0 || m[0] == 0xc0 {
		return nil
	}
	r := reader{b: m, text: true}
	n, err := r.mapHeader()
	if err != nil {
		return invalid(prefix, "must be a map: "+err.(*DecodeError).Msg)
	}
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return invalid(prefix, "keys must be strs: "+err.(*DecodeError).Msg)
		}
		key := string(k)
		if msg := f(key, &r); msg != "" {
			return invalid(prefix+"."+key, msg)
		}
	}
	if !r.done() {
		return invalid(prefix, "trailing bytes after the map")
	}
	return nil
}

// value reads one value for eachField's callbacks and checks it as Any.
func (r *reader) anyValue() string {
	start := r.off
	if err := r.skip(); err != nil {
		return err.(*DecodeError).Msg
	}
	return checkAny(Raw(r.b[start:r.off]))
}

// skipValue steps over a value the engine does not decode (an unknown key's).
func (r *reader) skipValue() string {
	if err := r.skip(); err != nil {
		return err.(*DecodeError).Msg
	}
	return ""
}

// typed reads one value of a declared type for eachField's callbacks.
func (r *reader) typed(want string, read func() error) string {
	if err := read(); err != nil {
		if de, ok := err.(*DecodeError); ok {
			return "must be " + want + ": " + de.Msg
		}
		return "must be " + want
	}
	return ""
}

// checkStrKeyMap checks a dict[str, Any] | None (extra_args, reasoning_parser_kwargs).
func checkStrKeyMap(name string, m Raw) error {
	return eachField(name, m, func(_ string, r *reader) string { return r.anyValue() })
}

// checkDictAny checks a dict | None of any scalar keys (tensorizer_config_dict).
func checkDictAny(name string, m Raw) error {
	if len(m) > 0 && kindOf(m[0]) != kindMap && m[0] != 0xc0 {
		return invalid(name, "must be a map or nil")
	}
	if msg := checkAny(m); msg != "" {
		return invalid(name, msg)
	}
	return nil
}

// checkArrayAny checks a list of structs we pass through (mm_features,
// pooling_params' array) only as far as Any goes.
func checkArrayAny(name string, v Raw) error {
	if len(v) > 0 && kindOf(v[0]) != kindArray && v[0] != 0xc0 {
		return invalid(name, "must be an array or nil")
	}
	if msg := checkAny(v); msg != "" {
		return invalid(name, msg)
	}
	return nil
}

// checkLogitBias checks dict[int, float] | None. finite additionally refuses NaN and
// infinite biases (a project rule; the engine would add them to the logits).
func checkLogitBias(v Raw, finite bool) error {
	const name = "logit_bias"
	if len(v) == 0 || v[0] == 0xc0 {
		return nil
	}
	r := reader{b: v}
	n, err := r.mapHeader()
	if err != nil {
		return invalid(name, "must be a {int: float} map")
	}
	for range n {
		id, err := r.int()
		if err != nil {
			return invalid(name, "keys must be int token ids")
		}
		if finite && id < 0 {
			return invalid(name, "token id "+itoa(int(id))+" is negative")
		}
		f, err := r.float()
		if err != nil {
			return invalid(name, "values must be numbers")
		}
		if finite && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return invalid(name, "bias for token "+itoa(int(id))+" is not finite")
		}
	}
	if !r.done() {
		return invalid(name, "trailing bytes after the map")
	}
	return nil
}

// checkBadWordsTokenIDs checks list[list[int]] | None.
func checkBadWordsTokenIDs(v Raw, nonNegative bool) error {
	const name = "_bad_words_token_ids"
	if len(v) == 0 || v[0] == 0xc0 {
		return nil
	}
	r := reader{b: v}
	n, err := r.arrayHeader()
	if err != nil {
		return invalid(name, "must be [[int]]")
	}
	for range n {
		ids, err := r.ints(nil)
		if err != nil {
			return invalid(name, "must be [[int]]")
		}
		for _, id := range ids {
			if nonNegative && id < 0 {
				return invalid(name, "token ids must be non-negative")
			}
		}
	}
	if !r.done() {
		return invalid(name, "trailing bytes after the array")
	}
	return nil
}

// checkRepetitionDetection checks RepetitionDetectionParams: int fields (default 0),
// unknown keys ignored as msgspec ignores them, then its __post_init__:
// 0 <= min_pattern_size <= max_pattern_size, and min_count >= 2 when enabled.
func checkRepetitionDetection(v Raw) error {
	const name = "repetition_detection"
	var maxP, minP, minC int64
	err := eachField(name, v, func(k string, r *reader) string {
		var dst *int64
		switch k {
		case "max_pattern_size":
			dst = &maxP
		case "min_pattern_size":
			dst = &minP
		case "min_count":
			dst = &minC
		default:
			return r.skipValue() // unknown keys: msgspec ignores them
		}
		return r.typed("int", func() (err error) { *dst, err = r.int(); return })
	})
	if err != nil {
		return err
	}
	// sampling_params.py RepetitionDetectionParams.__post_init__
	if maxP < 0 || minP < 0 || minP > maxP {
		return invalid(name, "need max_pattern_size, min_pattern_size >= 0 and min_pattern_size <= max_pattern_size")
	}
	if maxP > 0 && minC < 2 {
		return invalid(name, "min_count must be >= 2 when max_pattern_size > 0")
	}
	return nil
}
