package wire

// A hand-written msgpack reader and writer. The reader is a bounds-checked cursor:
// every length prefix is checked against the bytes that remain before anything is
// allocated, so a 5-byte header claiming 2^32 elements is an error, not a 32 GiB
// allocation. The writer appends the forms msgspec chooses (smallest integer form,
// float64 for every float, str for text, bin for bytes, fixext for small ext values)
// so our bytes equal a Python peer's where the content is the same.

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// extRawView is vLLM's CUSTOM_TYPE_RAW_VIEW ext code: raw tensor/ndarray bytes.
const extRawView = 3

// msgpack kinds, used for type checks and error messages.
type kind uint8

const (
	kindInvalid kind = iota
	kindNil
	kindBool
	kindInt
	kindFloat
	kindStr
	kindBin
	kindArray
	kindMap
	kindExt
)

var kindNames = [...]string{"invalid", "nil", "bool", "int", "float", "str", "bin", "array", "map", "ext"}

func (k kind) String() string { return kindNames[k] }

// kindOf classifies a msgpack type byte.
func kindOf(c byte) kind {
	switch {
	case c <= 0x7f || c >= 0xe0:
		return kindInt
	case c <= 0x8f:
		return kindMap
	case c <= 0x9f:
		return kindArray
	case c <= 0xbf:
		return kindStr
	}
	switch c {
	case 0xc0:
		return kindNil
	case 0xc2, 0xc3:
		return kindBool
	case 0xc4, 0xc5, 0xc6:
		return kindBin
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return kindExt
	case 0xca, 0xcb:
		return kindFloat
	case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		return kindInt
	case 0xd9, 0xda, 0xdb:
		return kindStr
	case 0xdc, 0xdd:
		return kindArray
	case 0xde, 0xdf:
		return kindMap
	}
	return kindInvalid // 0xc1 is never used
}

// reader is a cursor over one msgpack frame. Errors carry the offset; the codec
// functions fill in the type and field names (see fieldErr).
//
// text makes every str (map keys and the strs inside skipped or raw values too) be
// valid UTF-8. The decoders of what a client or frontend sends to an engine set it:
// msgspec turns every str into a Python str, so one bad byte raises in the engine's
// input thread, which then dies without a word. Decoders of engine output leave it
// off (Python produced those strs), which keeps that hot path as it was.
type reader struct {
	b    []byte
	off  int
	text bool
}

func (r *reader) errorf(msg string) error { return &DecodeError{Offset: r.off, Msg: msg} }

func (r *reader) eof() error { return r.errorf("unexpected end of data") }

func (r *reader) expected(want string) error {
	if r.off >= len(r.b) {
		return r.eof()
	}
	return r.errorf("expected " + want + ", got " + kindOf(r.b[r.off]).String())
}

// fieldErr names the struct and field an error belongs to. An error that already
// names a nested type's field keeps it (the innermost name is the most precise); one
// about a nested value as a whole ("expected array") is named by the outer field.
func fieldErr(err error, typ, field string) error {
	if de, ok := err.(*DecodeError); ok && (de.Type == "" || de.Field == "" && field != "") {
		de.Type, de.Field = typ, field
	}
	return err
}

func (r *reader) done() bool { return r.off >= len(r.b) }

// peek returns the kind of the next value (kindInvalid at the end of data).
func (r *reader) peek() kind {
	if r.off >= len(r.b) {
		return kindInvalid
	}
	return kindOf(r.b[r.off])
}

// nextNil consumes a nil if one is next.
func (r *reader) nextNil() bool {
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

// need reports whether n more bytes are available after the cursor.
func (r *reader) need(n int) bool { return n >= 0 && n <= len(r.b)-r.off }

func (r *reader) u8() uint8 { v := r.b[r.off]; r.off++; return v }
func (r *reader) u16() uint16 {
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}
func (r *reader) u32() uint32 {
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}
func (r *reader) u64() uint64 {
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// lenPrefix reads an n-byte big-endian length after the type byte.
func (r *reader) lenPrefix(n int) (int, bool) {
	if !r.need(n) {
		return 0, false
	}
	switch n {
	case 1:
		return int(r.u8()), true
	case 2:
		return int(r.u16()), true
	default:
		return int(r.u32()), true
	}
}

// arrayHeader reads an array header. The count is checked against the remaining
// bytes (every element takes at least one), which bounds any allocation by it.
func (r *reader) arrayHeader() (int, error) { return r.header(0x90, 0xdc, "array", "elements", 1) }

// mapHeader reads a map header, bounded like arrayHeader (two bytes per entry).
func (r *reader) mapHeader() (int, error) { return r.header(0x80, 0xde, "map", "entries", 2) }

// header reads an array or map header: fix is the fix form's type byte for a
// count of zero (the count is its low four bits), c16 the type byte of the form
// with a 16-bit count and c16+1 that of the form with a 32-bit one. A count of
// more items than the remaining bytes can hold at minSize bytes each is an error.
func (r *reader) header(fix, c16 byte, what, items string, minSize int) (int, error) {
	if r.off >= len(r.b) {
		return 0, r.eof()
	}
	c := r.b[r.off]
	start := r.off
	var n int
	var ok bool
	switch {
	case c&0xf0 == fix:
		r.off++
		n, ok = int(c&0x0f), true
	case c == c16:
		r.off++
		n, ok = r.lenPrefix(2)
	case c == c16+1:
		r.off++
		n, ok = r.lenPrefix(4)
	default:
		return 0, r.expected(what)
	}
	if !ok {
		r.off = start
		return 0, r.eof()
	}
	if n*minSize > len(r.b)-r.off { // n < 2^32: no overflow
		r.off = start
		return 0, r.errorf(what + " of " + strconv.Itoa(n) + " " + items + " exceeds the remaining data")
	}
	return n, nil
}

// capFor bounds a preallocation for n elements of at least minSize encoded bytes
// each by what the remaining data can hold, so a large struct type cannot turn a
// length prefix into an allocation many times the frame's size.
func (r *reader) capFor(n, minSize int) int { return min(n, (len(r.b)-r.off)/minSize) }

// intRaw reads any msgpack integer as its uint64 bit pattern, reporting whether it
// was negative.
func (r *reader) intRaw() (bits uint64, neg bool, err error) {
	if r.off >= len(r.b) {
		return 0, false, r.eof()
	}
	c := r.b[r.off]
	switch {
	case c <= 0x7f:
		r.off++
		return uint64(c), false, nil
	case c >= 0xe0:
		r.off++
		return uint64(int64(int8(c))), true, nil
	}
	size := 0
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		return 0, false, r.expected("int")
	}
	if !r.need(1 + size) {
		return 0, false, r.eof()
	}
	r.off++
	var v uint64
	switch size {
	case 1:
		v = uint64(r.u8())
	case 2:
		v = uint64(r.u16())
	case 4:
		v = uint64(r.u32())
	default:
		v = r.u64()
	}
	if c >= 0xd0 { // signed forms: sign-extend
		var s int64
		switch size {
		case 1:
			s = int64(int8(v))
		case 2:
			s = int64(int16(v))
		case 4:
			s = int64(int32(v))
		default:
			s = int64(v)
		}
		return uint64(s), s < 0, nil
	}
	return v, false, nil
}

// int reads an integer that must fit int64 (msgspec's int also rejects floats).
func (r *reader) int() (int64, error) {
	start := r.off
	v, neg, err := r.intRaw()
	if err != nil {
		return 0, err
	}
	if !neg && v > math.MaxInt64 {
		r.off = start
		return 0, r.errorf("integer out of range")
	}
	return int64(v), nil
}

// optInt reads int | nil.
func (r *reader) optInt() (OptInt, error) {
	if r.nextNil() {
		return OptInt{}, nil
	}
	v, err := r.int()
	return OptInt{Value: v, Valid: err == nil}, err
}

// float reads a float64; msgspec accepts an int for a float field.
func (r *reader) float() (float64, error) {
	if r.off >= len(r.b) {
		return 0, r.eof()
	}
	switch c := r.b[r.off]; c {
	case 0xcb:
		if !r.need(9) {
			return 0, r.eof()
		}
		r.off++
		return math.Float64frombits(r.u64()), nil
	case 0xca:
		if !r.need(5) {
			return 0, r.eof()
		}
		r.off++
		return float64(math.Float32frombits(r.u32())), nil
	default:
		if kindOf(c) != kindInt {
			return 0, r.expected("float")
		}
		v, neg, err := r.intRaw()
		if neg {
			return float64(int64(v)), err
		}
		return float64(v), err
	}
}

func (r *reader) bool() (bool, error) {
	if r.off < len(r.b) {
		switch r.b[r.off] {
		case 0xc2:
			r.off++
			return false, nil
		case 0xc3:
			r.off++
			return true, nil
		}
	}
	return false, r.expected("bool")
}

func (r *reader) optBool() (OptBool, error) {
	if r.nextNil() {
		return OptBool{}, nil
	}
	v, err := r.bool()
	return OptBool{Value: v, Valid: err == nil}, err
}

// strBytes reads a str and returns a view into the frame (no copy).
func (r *reader) strBytes() ([]byte, error) {
	if r.off >= len(r.b) {
		return nil, r.eof()
	}
	c := r.b[r.off]
	start := r.off
	var n int
	var ok bool
	switch {
	case c >= 0xa0 && c <= 0xbf:
		r.off++
		n, ok = int(c&0x1f), true
	case c == 0xd9:
		r.off++
		n, ok = r.lenPrefix(1)
	case c == 0xda:
		r.off++
		n, ok = r.lenPrefix(2)
	case c == 0xdb:
		r.off++
		n, ok = r.lenPrefix(4)
	default:
		return nil, r.expected("str")
	}
	if !ok || !r.need(n) {
		r.off = start
		return nil, r.eof()
	}
	s := r.b[r.off : r.off+n : r.off+n]
	if r.text && !utf8.Valid(s) {
		r.off = start
		return nil, r.errorf("str is not valid UTF-8")
	}
	r.off += n
	return s, nil
}

func (r *reader) str() (string, error) {
	b, err := r.strBytes()
	return string(b), err
}

func (r *reader) optStr() (OptString, error) {
	if r.nextNil() {
		return OptString{}, nil
	}
	s, err := r.str()
	return OptString{Value: s, Valid: err == nil}, err
}

// bin reads a bin value as a view into the frame.
func (r *reader) bin() ([]byte, error) {
	if r.off >= len(r.b) {
		return nil, r.eof()
	}
	start := r.off
	var n int
	var ok bool
	switch r.b[r.off] {
	case 0xc4:
		r.off++
		n, ok = r.lenPrefix(1)
	case 0xc5:
		r.off++
		n, ok = r.lenPrefix(2)
	case 0xc6:
		r.off++
		n, ok = r.lenPrefix(4)
	default:
		return nil, r.expected("bin")
	}
	if !ok || !r.need(n) {
		r.off = start
		return nil, r.eof()
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b, nil
}

// ext reads an ext value: its type code and a view of its data.
func (r *reader) ext() (int8, []byte, error) {
	if r.off >= len(r.b) {
		return 0, nil, r.eof()
	}
	start := r.off
	c := r.b[r.off]
	var n int
	ok := true
	r.off++
	switch c {
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		n = 1 << (c - 0xd4)
	case 0xc7:
		n, ok = r.lenPrefix(1)
	case 0xc8:
		n, ok = r.lenPrefix(2)
	case 0xc9:
		n, ok = r.lenPrefix(4)
	default:
		r.off = start
		return 0, nil, r.expected("ext")
	}
	if !ok || !r.need(1+n) {
		r.off = start
		return 0, nil, r.eof()
	}
	code := int8(r.u8())
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return code, b, nil
}

// skip steps over one complete value of any shape, without recursion: it counts
// the values still to be skipped, so deep nesting cannot exhaust the stack.
func (r *reader) skip() error {
	for pending := 1; pending > 0; pending-- {
		if r.off >= len(r.b) {
			return r.eof()
		}
		c := r.b[r.off]
		switch kindOf(c) {
		case kindNil, kindBool:
			r.off++
		case kindInt:
			if _, _, err := r.intRaw(); err != nil {
				return err
			}
		case kindFloat:
			n := 5
			if c == 0xcb {
				n = 9
			}
			if !r.need(n) {
				return r.eof()
			}
			r.off += n
		case kindStr:
			if _, err := r.strBytes(); err != nil {
				return err
			}
		case kindBin:
			if _, err := r.bin(); err != nil {
				return err
			}
		case kindExt:
			if _, _, err := r.ext(); err != nil {
				return err
			}
		case kindArray:
			n, err := r.arrayHeader()
			if err != nil {
				return err
			}
			pending += n
		case kindMap:
			n, err := r.mapHeader()
			if err != nil {
				return err
			}
			pending += 2 * n
		default:
			return r.errorf("invalid type byte 0xc1")
		}
	}
	return nil
}

// raw returns the next value undecoded (a view into the frame); nil for msgpack nil.
func (r *reader) raw() (Raw, error) {
	if r.nextNil() {
		return nil, nil
	}
	start := r.off
	if err := r.skip(); err != nil {
		return nil, err
	}
	return Raw(r.b[start:r.off:r.off]), nil
}

// rawOf is raw restricted to nil or one kind (a map-typed or array-typed field).
func (r *reader) rawOf(k kind) (Raw, error) {
	if p := r.peek(); p != kindNil && p != k {
		return nil, r.expected(k.String() + " or nil")
	}
	return r.raw()
}

// skipRest skips the n trailing elements of an array this version does not know.
func (r *reader) skipRest(n int) error {
	for ; n > 0; n-- {
		if err := r.skip(); err != nil {
			return err
		}
	}
	return nil
}

// validRaw reports whether b holds exactly one well-formed msgpack value.
func validRaw(b Raw) bool {
	if len(b) == 0 {
		return true // nil Raw is written as msgpack nil
	}
	r := reader{b: b}
	return r.skip() == nil && r.done()
}

// ArrayLen reads the element count of a raw msgpack array (utility arguments).
func ArrayLen(b Raw) (int, error) {
	r := reader{b: b}
	return r.arrayHeader()
}
