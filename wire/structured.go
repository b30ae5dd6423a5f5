package wire

// structured_outputs is vLLM's StructuredOutputsParams (vllm/sampling_params.py), a
// dataclass the engine decodes by field name, ignoring unknown keys, and whose
// __post_init__ runs on decode: exactly one constraint must be set. The frontend
// adds content rules in SamplingParams._validate_structured_outputs, which a
// request from switchyard must also pass because vLLM's own frontend would refuse it.

import (
	"slices"
	"strings"
	"unicode"
)

// structuredConstraints are the fields __post_init__ counts; exactly one of them
// must be non-nil.
var structuredConstraints = [...]string{"json", "regex", "choice", "grammar", "json_object", "structural_tag"}

// structuredFields are all the fields StructuredOutputsParams declares (_backend and
// _backend_was_auto are set by vLLM's frontend and travel with the request).
var structuredFields = [...]string{
	"json", "regex", "choice", "grammar", "json_object", "structural_tag",
	"disable_any_whitespace", "disable_additional_properties", "whitespace_pattern",
	"_backend", "_backend_was_auto",
}

// checkStructuredOutputs checks the map. frontend adds the rules of vLLM's frontend
// (_validate_structured_outputs) and refuses keys StructuredOutputsParams does not
// declare; without it only what the engine's decode and __post_init__ reject fails.
func checkStructuredOutputs(v Raw, frontend bool) error {
	const name = "structured_outputs"
	if len(v) == 0 || v[0] == 0xc0 {
		return nil
	}
	set := 0
	err := eachField(name, v, func(k string, r *reader) string {
		if frontend && !slices.Contains(structuredFields[:], k) {
			return "is not a field of StructuredOutputsParams"
		}
		if r.peek() == kindNil {
			switch k {
			case "disable_any_whitespace", "disable_additional_properties", "_backend_was_auto":
				return "must be a bool, not nil"
			}
			r.off++
			return ""
		}
		for _, c := range structuredConstraints {
			if k == c {
				set++
			}
		}
		switch k {
		case "json": // str | dict | None
			if r.peek() == kindMap {
				return r.anyValue()
			}
			s, msg := r.strValue("a str or a map")
			if msg == "" && frontend && isBlank(s) {
				return "cannot be an empty string" // _validate_structured_outputs
			}
			return msg
		case "regex":
			s, msg := r.strValue("a str")
			if msg == "" && frontend && strings.IndexByte(s, 0) >= 0 {
				return "must not contain a NUL character" // _validate_structured_outputs
			}
			return msg
		case "grammar":
			s, msg := r.strValue("a str")
			if msg == "" && frontend && isBlank(s) {
				return "cannot be an empty string" // _validate_structured_outputs
			}
			return msg
		case "whitespace_pattern", "structural_tag", "_backend":
			_, msg := r.strValue("a str")
			return msg
		case "choice": // list[str] | None
			n, err := r.arrayHeader()
			if err != nil {
				return "must be a list of strs"
			}
			if n == 0 && frontend {
				return "cannot be an empty list" // _validate_structured_outputs
			}
			for range n {
				if _, msg := r.strValue("a list of strs"); msg != "" {
					return msg
				}
			}
			return ""
		case "json_object":
			b, err := r.bool()
			if err != nil {
				return "must be a bool"
			}
			if !b && frontend {
				return "must be true if set; omit structured_outputs to disable it" // _validate_structured_outputs
			}
			return ""
		case "disable_any_whitespace", "disable_additional_properties", "_backend_was_auto":
			return r.typed("a bool", func() error { _, err := r.bool(); return err })
		}
		return r.skipValue() // the engine ignores keys it does not declare
	})
	if err != nil {
		return err
	}
	if set != 1 { // StructuredOutputsParams.__post_init__
		return invalid(name, "exactly one of json, regex, choice, grammar, json_object, structural_tag must be set, got "+itoa(set))
	}
	return nil
}

// strValue reads a str for a typed field.
func (r *reader) strValue(want string) (string, string) {
	s, err := r.str()
	if err != nil {
		return "", "must be " + want + ": " + err.(*DecodeError).Msg
	}
	return s, ""
}

// isBlank is Python's s.strip() == "": str.isspace also counts the separators
// U+001C..U+001F, which Go's unicode.IsSpace does not.
func isBlank(s string) bool {
	return strings.TrimFunc(s, func(c rune) bool {
		return unicode.IsSpace(c) || c >= 0x1c && c <= 0x1f
	}) == ""
}
