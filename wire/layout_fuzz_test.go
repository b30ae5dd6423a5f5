package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Fuzz targets for the layout codecs: every built-in layout's decoders take every
// input without a panic, and what one of them decodes survives its own encode ->
// decode unchanged. The corpus is each release's golden messages.

func seedVersionBodies(f *testing.F, prefix string) {
	for _, l := range BuiltinLayouts() {
		for _, fx := range loadVersionFixtures(f, l.Name).Fixtures {
			if strings.HasPrefix(fx.Name, prefix) {
				body := fx.frames[0]
				if len(body) == 1 && len(fx.frames) > 1 {
					body = fx.frames[1]
				}
				f.Add(body)
			}
		}
	}
}

func FuzzLayoutDecodeOutputs(f *testing.F) {
	seedVersionBodies(f, "outputs_")
	layouts := BuiltinLayouts()
	decs := make([]OutputsDecoder, len(layouts))
	for i, l := range layouts {
		decs[i].Layout = l
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i, l := range layouts {
			var o EngineCoreOutputs
			if decs[i].Decode(append([][]byte{body}, auxFrames...), &o) != nil {
				continue
			}
			_ = decs[i].CheckLayout()
			enc, aux, err := l.AppendOutputs(nil, &o)
			var le *LayoutError
			if errors.As(err, &le) {
				continue // a finish reason the release does not have: the mock never sends it
			}
			if err != nil {
				t.Fatalf("%s: decoded but cannot encode: %v", l.Name, err)
			}
			var again EngineCoreOutputs
			d := OutputsDecoder{Layout: l}
			if err := d.Decode(append([][]byte{enc}, aux...), &again); err != nil {
				t.Fatalf("%s: re-decode: %v\n%x", l.Name, err, enc)
			}
			if diff := cmp.Diff(o, again, fuzzOpts); diff != "" {
				t.Fatalf("%s: round trip changed the message:\n%s", l.Name, diff)
			}
		}
	})
}

func FuzzLayoutDecodeAdd(f *testing.F) {
	seedVersionBodies(f, "add_")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, l := range BuiltinLayouts() {
			var q EngineCoreRequest
			if l.DecodeAdd(append([][]byte{body}, auxFrames...), &q) != nil {
				continue
			}
			enc, aux, err := l.AppendAdd(nil, &q)
			var le *LayoutError
			if errors.As(err, &le) && !l.Native && passedThroughRaw(le.Field) {
				// A raw value (pooling_params, mm_features, kv hints) decodes from
				// any release but is sent only to native-layout engines: the
				// frontend refuses it before sending rather than guess its shape.
				continue
			}
			if err != nil {
				t.Fatalf("%s: decoded but cannot encode: %v", l.Name, err)
			}
			var again EngineCoreRequest
			if err := l.DecodeAdd(append([][]byte{enc}, aux...), &again); err != nil {
				t.Fatalf("%s: re-decode: %v\n%x", l.Name, err, enc)
			}
			if diff := cmp.Diff(q, again, fuzzOpts); diff != "" {
				t.Fatalf("%s: round trip changed the request:\n%s", l.Name, diff)
			}
		}
	})
}

// passedThroughRaw reports a request field whose value is kept raw and sent only to
// native-layout engines.
func passedThroughRaw(field string) bool {
	for _, id := range []uint8{reqPooling, reqMMFeatures, reqKVHints} {
		if field == requestFieldNames[id] {
			return true
		}
	}
	return false
}

// FuzzParseLayout: an operator's layout file never panics the loader, and a file
// that loads can encode a request and decode its own outputs.
func FuzzParseLayout(f *testing.F) {
	for _, l := range BuiltinLayouts() {
		b, _ := l.JSON()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLayout(data, "fuzz")
		if err != nil {
			return
		}
		q := goodRequest()
		if _, _, err := l.AppendAdd(nil, q); err != nil {
			var le *LayoutError
			if !errors.As(err, &le) {
				t.Fatalf("a loaded layout cannot encode a plain request: %v", err)
			}
		}
		o := EngineCoreOutputs{Outputs: []EngineCoreOutput{{RequestID: "r", NewTokenIDs: []int64{1}}}}
		enc, _, err := l.AppendOutputs(nil, &o)
		if err != nil {
			t.Fatal(err)
		}
		d := OutputsDecoder{Layout: l}
		if err := d.Decode([][]byte{enc}, &o); err != nil {
			t.Fatalf("a loaded layout cannot decode its own outputs: %v", err)
		}
	})
}
