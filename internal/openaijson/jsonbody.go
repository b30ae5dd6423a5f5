package openaijson

// The body decoder. encoding/json decodes the whole body into memory
// before anything can look at it (a 32 MiB body of token ids cost ~380 MB and 30 s
// of CPU before the prompt limit refused it), matches field names case-
// insensitively (vLLM's pydantic models match exactly, so "MAX_TOKENS" must not
// set max_tokens) and names Go types in its errors. This decoder reads the body as
// a stream: the prompt's token ids are parsed as they arrive and the read stops at
// the first id past apicore.MaxPromptTokens; unknown fields are skipped without being kept;
// known fields are matched exactly and their (small) values decoded one by one;
// nesting is bounded (maxJSONDepth), so no value can exhaust the stack.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"io"
	"reflect"
	"sync"
)

const (
	// maxJSONDepth bounds the nesting of any value in a body. A completions body
	// needs three levels; pydantic accepts deeper, but nothing switchyard reads
	// is deeper than that, and the bound keeps the recursive scanner's stack small.
	maxJSONDepth = 64
	// MaxFieldBytes bounds the raw JSON of one known field other than the prompt
	// (stop_token_ids is the largest in practice).
	MaxFieldBytes = 1 << 20
	// maxKeyBytes bounds a field name; a longer one is no field we know.
	maxKeyBytes = 256
)

// errBodyTooDeep and friends are syntax errors of the body; jsonBodyError turns
// them into a 400.
var errBodyTooDeep = fmt.Errorf("nested more than %d levels deep", maxJSONDepth)

// bodySyntaxError is malformed JSON at Offset (bytes from the start of the body).
type bodySyntaxError struct {
	Offset int64
	Msg    string
}

func (e *bodySyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON body: %s at offset %d", e.Msg, e.Offset)
}

// readerPool recycles the decoder's read buffers: one per request in flight.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// jsonReader is the byte-level scanner: a bufio.Reader that counts its offset.
type jsonReader struct {
	r   *bufio.Reader
	off int64
	buf []byte // capture target of value(); nil when skipping
	// scratch and key are reused across a body's fields (capture) and member
	// names (object), so neither allocates per field. Never nil (Decode
	// starts them on the arrays below): capture relies on p.buf != nil.
	scratch, key []byte
	num          []byte // a skipped or captured number's text (value)
	// The first buffers of scratch, key and num, in the reader's own allocation.
	scratchArr [64]byte
	keyArr     [32]byte
	numArr     [32]byte
	// names interns known member names (Decoder.names).
	names map[string]string
	// maxTokens bounds one prompt's ids, maxPrompts a prompt list.
	maxTokens, maxPrompts int
}

func (p *jsonReader) next() (byte, error) {
	c, err := p.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, p.syntax("unexpected end of body")
		}
		return 0, err
	}
	p.off++
	if p.buf != nil {
		p.buf = append(p.buf, c)
		if len(p.buf) > MaxFieldBytes {
			return 0, errFieldTooLarge
		}
	}
	return c, nil
}

var errFieldTooLarge = fmt.Errorf("a field value is larger than %d bytes", MaxFieldBytes)

func (p *jsonReader) syntax(format string, args ...any) error {
	return &bodySyntaxError{Offset: p.off, Msg: fmt.Sprintf(format, args...)}
}

// ws skips whitespace and returns the next byte, consumed.
func (p *jsonReader) ws() (byte, error) {
	for {
		c, err := p.next()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// trailing skips whitespace to the end of the body and reports whether anything
// else follows. The end of the body is the normal case here, so it is not turned
// into the syntax error ws would build for it.
func (p *jsonReader) trailing() (bool, error) {
	for {
		c, err := p.r.ReadByte()
		switch {
		case err == io.EOF:
			return false, nil
		case err != nil:
			return false, err
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			return true, nil
		}
		p.off++
	}
}

// peekWS skips whitespace and returns the next byte without consuming it.
func (p *jsonReader) peekWS() (byte, error) {
	for {
		b, err := p.r.Peek(1)
		if err != nil {
			if err == io.EOF {
				return 0, p.syntax("unexpected end of body")
			}
			return 0, err
		}
		c := b[0]
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
		if _, err := p.next(); err != nil {
			return 0, err
		}
	}
}

// str reads the rest of a string whose opening quote was consumed, validating
// escapes and control characters. With keep, it appends the raw bytes between the
// quotes to raw, up to limit of them (longer: truncated, over=true), and returns it.
func (p *jsonReader) str(raw []byte, keep bool, limit int) (_ []byte, over bool, err error) {
	for {
		c, err := p.next()
		if err != nil {
			return nil, false, err
		}
		switch {
		case c == '"':
			return raw, over, nil
		case c < 0x20:
			return nil, false, p.syntax("control character in string")
		case c == '\\':
			e, err := p.next()
			if err != nil {
				return nil, false, err
			}
			esc := []byte{c, e}
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					h, err := p.next()
					if err != nil {
						return nil, false, err
					}
					if !isHex(h) {
						return nil, false, p.syntax("invalid \\u escape")
					}
					esc = append(esc, h)
				}
			default:
				return nil, false, p.syntax("invalid escape \\%c", e)
			}
			if keep {
				if len(raw)+len(esc) > limit {
					over = true
				} else {
					raw = append(raw, esc...)
				}
			}
		default:
			if keep {
				if len(raw) >= limit {
					over = true
				} else {
					raw = append(raw, c)
				}
			}
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number reads a JSON number whose first byte c was consumed; it returns the
// number's text (appended to dst) and whether it is an integer.
func (p *jsonReader) number(c byte, dst []byte) ([]byte, bool, error) {
	dst = append(dst, c)
	digits := func() (int, error) {
		n := 0
		for {
			b, err := p.r.Peek(1)
			if err != nil || b[0] < '0' || b[0] > '9' {
				return n, nil
			}
			if _, err := p.next(); err != nil {
				return n, err
			}
			dst = append(dst, b[0])
			n++
		}
	}
	integer := true
	if c == '-' {
		n, err := digits()
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			return nil, false, p.syntax("invalid number")
		}
	} else if c != '0' {
		if _, err := digits(); err != nil {
			return nil, false, err
		}
	}
	if b, err := p.r.Peek(1); err == nil && b[0] == '.' {
		integer = false
		_, _ = p.next()
		dst = append(dst, '.')
		if n, err := digits(); err != nil || n == 0 {
			return nil, false, p.syntax("invalid number")
		}
	}
	if b, err := p.r.Peek(1); err == nil && (b[0] == 'e' || b[0] == 'E') {
		integer = false
		_, _ = p.next()
		dst = append(dst, 'e')
		if b, err := p.r.Peek(1); err == nil && (b[0] == '+' || b[0] == '-') {
			_, _ = p.next()
			dst = append(dst, b[0])
		}
		if n, err := digits(); err != nil || n == 0 {
			return nil, false, p.syntax("invalid number")
		}
	}
	return dst, integer, nil
}

// literal reads the rest of true, false or null after its first byte.
func (p *jsonReader) literal(c byte) error {
	var rest string
	switch c {
	case 't':
		rest = "rue"
	case 'f':
		rest = "alse"
	case 'n':
		rest = "ull"
	}
	for i := range len(rest) {
		b, err := p.next()
		if err != nil {
			return err
		}
		if b != rest[i] {
			return p.syntax("invalid literal")
		}
	}
	return nil
}

// value reads one complete value (validating it) after leading whitespace.
// Recursion is bounded by maxJSONDepth.
func (p *jsonReader) value(depth int) error {
	if depth > maxJSONDepth {
		return errBodyTooDeep
	}
	c, err := p.ws()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		_, _, err := p.str(nil, false, 0)
		return err
	case c == '-' || c >= '0' && c <= '9':
		text, _, err := p.number(c, p.num[:0])
		if cap(text) <= maxKeptScratch {
			p.num = text[:0]
		}
		return err
	case c == 't' || c == 'f' || c == 'n':
		return p.literal(c)
	case c == '[':
		if b, err := p.peekWS(); err != nil {
			return err
		} else if b == ']' {
			_, err := p.next()
			return err
		}
		for {
			if err := p.value(depth + 1); err != nil {
				return err
			}
			c, err := p.ws()
			if err != nil {
				return err
			}
			if c == ']' {
				return nil
			}
			if c != ',' {
				return p.syntax("expected , or ] in array")
			}
		}
	case c == '{':
		return p.object(depth, func(string) error { return p.value(depth + 1) })
	}
	return p.syntax("unexpected %q", c)
}

// object reads the members of an object whose '{' was consumed, calling member
// with each (decoded) key once the reader is at its value.
func (p *jsonReader) object(depth int, member func(key string) error) error {
	c, err := p.ws()
	if err != nil {
		return err
	}
	if c == '}' {
		return nil
	}
	for {
		if c != '"' {
			return p.syntax("expected a field name")
		}
		// In capture mode next() also appends the key's bytes to p.buf.
		raw, over, err := p.str(p.key[:0], true, maxKeyBytes)
		if err != nil {
			return err
		}
		p.key = raw
		key := p.memberName(raw)
		if over {
			key = "" // no field we know is that long
		} else if bytes.IndexByte(raw, '\\') >= 0 {
			// An escaped name matches by its decoded text, as Python's json does.
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) == nil {
				key = s
			}
		}
		if c, err = p.ws(); err != nil {
			return err
		} else if c != ':' {
			return p.syntax("expected : after a field name")
		}
		if err := member(key); err != nil {
			return err
		}
		if c, err = p.ws(); err != nil {
			return err
		}
		if c == '}' {
			return nil
		}
		if c != ',' {
			return p.syntax("expected , or } in object")
		}
		if c, err = p.ws(); err != nil {
			return err
		}
	}
}

// capture reads one value and returns its raw JSON, valid until the next capture:
// the fields of a body are captured one after the other into one scratch buffer.
func (p *jsonReader) capture() ([]byte, error) {
	// The whitespace before the value is not part of it: the scalar fast paths
	// (and "null" checks) see the value itself, as `"max_tokens": 16` from
	// Python's json.dumps writes it.
	if _, err := p.peekWS(); err != nil {
		return nil, err
	}
	p.buf = p.scratch[:0] // non-nil: next() appends while capturing
	err := p.value(1)
	raw := p.buf
	p.buf = nil
	if cap(raw) <= maxKeptScratch {
		p.scratch = raw[:0]
	}
	return raw, err
}

// maxKeptScratch: a captured field larger than this (a long stop_token_ids) is not
// kept as the scratch buffer for the body's next fields.
const maxKeptScratch = 4 << 10

// Decode reads a body that must be one JSON object, through a pooled reader;
// after the object only whitespace may follow. Member names match exactly (an
// escaped name is the name it spells; a repeated name: the last wins, as in
// Python). fields names where a known member decodes to (nil: unknown, skipped
// without being kept). With prompt set, the "prompt" member is parsed into it as
// it streams in, each list cut at prompt.MaxTokens ids; without, "prompt" is a
// field like any other. A client's fault is an *Error; a read error (the body's
// size limit, a deadline) is returned as the reader gave it.
func (d *Decoder) Decode(r io.Reader, fields func(key string) any, prompt *Prompt) error {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil) // drop the body
		readerPool.Put(br)
	}()
	p := &jsonReader{r: br, names: d.names, maxPrompts: d.maxPrompts, maxTokens: apicore.MaxPromptTokens}
	if prompt != nil && prompt.MaxTokens > 0 && prompt.MaxTokens < apicore.MaxPromptTokens {
		p.maxTokens = prompt.MaxTokens
	}
	p.scratch, p.key, p.num = p.scratchArr[:0], p.keyArr[:0], p.numArr[:0]
	c, err := p.ws()
	if err != nil {
		var se *bodySyntaxError
		if errors.As(err, &se) && se.Offset == 0 {
			return badRequest("", "invalid JSON body: empty body")
		}
		return jsonBodyError(err)
	}
	if c != '{' {
		return badRequest("", "invalid JSON body: the body must be a JSON object")
	}
	err = p.object(1, func(key string) error {
		if prompt != nil && key == "prompt" {
			return p.prompt(prompt)
		}
		dst := fields(key)
		if dst == nil {
			return p.value(2)
		}
		raw, err := p.capture()
		if err != nil {
			if errors.Is(err, errFieldTooLarge) {
				return badRequest(key, "%s is larger than %d bytes", key, MaxFieldBytes)
			}
			return err
		}
		return decodeField(key, raw, dst)
	})
	if err != nil {
		return jsonBodyError(err)
	}
	if more, err := p.trailing(); err != nil {
		return jsonBodyError(err) // a read error (timeout, body too large)
	} else if more {
		return badRequest("", "invalid JSON body: unexpected data after the top-level object")
	}
	return nil
}

// jsonBodyError maps a decode failure to an *Error; an *Error passes through, a
// read error (too large, timed out) is returned as is for the caller to map.
func jsonBodyError(err error) error {
	var fe *Error
	var se *bodySyntaxError
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &se):
		return badRequest("", "%s", se.Error())
	case errors.Is(err, errBodyTooDeep):
		return badRequest("", "invalid JSON body: %v", err)
	}
	return err
}

// decodeField decodes one known field's raw JSON into dst, naming the field and
// the JSON type expected (never a Go type) when it does not fit.
func decodeField(key string, raw []byte, dst any) error {
	if so, ok := dst.(**StreamOptions); ok {
		return decodeStreamOptions(key, raw, so)
	}
	if rm, ok := dst.(*json.RawMessage); ok {
		// capture already checked the syntax; a chat's messages are kept raw
		// for the template's own decoder, and re-validating them costs as much.
		// A copy: raw is the reader's scratch buffer, reused for the next field.
		*rm = bytes.Clone(raw)
		return nil
	}
	if scalarField(raw, dst) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(key, "%s: expected %s, got JSON %s", key, jsonTypeName(reflect.TypeOf(dst).Elem()), te.Value)
		}
		return badRequest(key, "%s: %v", key, err)
	}
	return nil
}

// decodeStreamOptions matches stream_options' own field exactly, as vLLM does.
func decodeStreamOptions(key string, raw []byte, dst **StreamOptions) error {
	if bytes.Equal(raw, []byte("null")) {
		*dst = nil
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return badRequest(key, "%s: expected an object", key)
	}
	so := &StreamOptions{}
	if v, ok := m["include_usage"]; ok {
		if err := json.Unmarshal(v, &so.IncludeUsage); err != nil {
			return badRequest(key, "%s.include_usage: expected a boolean", key)
		}
	}
	if v, ok := m["continuous_usage_stats"]; ok {
		if err := json.Unmarshal(v, &so.ContinuousUsageStats); err != nil {
			return badRequest(key, "%s.continuous_usage_stats: expected a boolean", key)
		}
	}
	*dst = so
	return nil
}

// jsonTypeName names a Go type in JSON's words, for error messages.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() == "RawMessage" {
			return "a JSON value"
		}
		return "a list of " + plural(jsonTypeName(t.Elem()))
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a JSON value"
}

func plural(s string) string {
	for _, a := range []string{"an ", "a "} {
		if len(s) > len(a) && s[:len(a)] == a {
			return s[len(a):] + "s"
		}
	}
	return s
}
