package wire

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// generic decodes one msgpack value into the JSON shape the golden fixtures use:
// ints as "int:<decimal>", floats as float64, str as string, bin as
// {"bin_hex": ...}, ext as {"ext": code, "hex": ...}, arrays and maps as []any and
// map[string]any. It exists only to compare messages in tests.
func generic(b []byte) (any, error) {
	r := reader{b: b}
	v, err := r.genericValue()
	if err != nil {
		return nil, err
	}
	if !r.done() {
		return nil, fmt.Errorf("trailing bytes at %d", r.off)
	}
	return v, nil
}

func (r *reader) genericValue() (any, error) {
	switch r.peek() {
	case kindNil:
		r.off++
		return nil, nil
	case kindBool:
		return r.bool()
	case kindInt:
		v, neg, err := r.intRaw()
		if neg {
			return "int:" + strconv.FormatInt(int64(v), 10), err
		}
		return "int:" + strconv.FormatUint(v, 10), err
	case kindFloat:
		return r.float()
	case kindStr:
		return r.str()
	case kindBin:
		b, err := r.bin()
		return map[string]any{"bin_hex": hex.EncodeToString(b)}, err
	case kindExt:
		c, b, err := r.ext()
		return map[string]any{"ext": "int:" + strconv.Itoa(int(c)), "hex": hex.EncodeToString(b)}, err
	case kindArray:
		n, err := r.arrayHeader()
		if err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = r.genericValue(); err != nil {
				return nil, err
			}
		}
		return out, nil
	case kindMap:
		n, err := r.mapHeader()
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, n)
		for range n {
			var k string
			if r.peek() == kindInt {
				kv, err := r.genericValue()
				if err != nil {
					return nil, err
				}
				k = kv.(string)
			} else if k, err = r.str(); err != nil {
				return nil, err
			}
			if out[k], err = r.genericValue(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, r.expected("a value")
}

// fromJSON converts a fixture's JSON value (decoded with UseNumber) to generic's shape.
func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, _ := x.Float64()
			return f
		}
		return "int:" + string(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = fromJSON(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fromJSON(e)
		}
		return out
	}
	return v
}
