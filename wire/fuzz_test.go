package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Fuzz targets, one per decoder, seeded with the golden corpus. Beyond "no panic",
// each checks that whatever decodes also survives encode -> decode unchanged, so a
// decoder can never accept a value our own encoder would turn into something else.
//
//	go test -run '^$' -fuzz '^FuzzDecodeOutputs$' -fuzztime 60s ./wire/

// seedBodies adds the msgpack body of every golden fixture whose name has prefix.
func seedBodies(f *testing.F, prefixes ...string) {
	for _, fx := range loadGolden(f) {
		for _, p := range prefixes {
			if strings.HasPrefix(fx.Name, p) {
				body := fx.frames[0]
				if len(body) == 1 && len(fx.frames) > 1 {
					body = fx.frames[1]
				}
				f.Add(body)
			}
		}
	}
}

// auxFrames gives fuzzed outputs/ADDs some aux frames to point into.
var auxFrames = [][]byte{bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{2}, 40)}

var fuzzOpts = cmp.Options{cmpopts.IgnoreFields(Tensor{}, "AuxIndex"), ignoreKeys, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()}

func FuzzDecodeAdd(f *testing.F) {
	seedBodies(f, "add_")
	var sp SamplingParams // reused across inputs: DecodeAddWith must overwrite all of it
	f.Fuzz(func(t *testing.T, body []byte) {
		var q, with EngineCoreRequest
		err := DecodeAdd(append([][]byte{body}, auxFrames...), &q)
		errWith := DecodeAddWith(append([][]byte{body}, auxFrames...), &with, &sp)
		if (err == nil) != (errWith == nil) {
			t.Fatalf("DecodeAdd: %v, DecodeAddWith: %v", err, errWith)
		}
		if err != nil {
			return
		}
		if d := cmp.Diff(q, with, fuzzOpts); d != "" {
			t.Fatalf("DecodeAddWith decoded another request:\n%s", d)
		}
		enc, aux, err := AppendAdd(nil, &q)
		if err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		var again EngineCoreRequest
		if err := DecodeAdd(append([][]byte{enc}, aux...), &again); err != nil {
			t.Fatalf("re-decode: %v\n%x", err, enc)
		}
		if d := cmp.Diff(q, again, fuzzOpts); d != "" {
			t.Fatalf("round trip changed the request:\n%s", d)
		}
	})
}

func FuzzDecodeOutputs(f *testing.F) {
	seedBodies(f, "outputs_")
	var d OutputsDecoder // reused across inputs, as the receive loop does
	var o EngineCoreOutputs
	f.Fuzz(func(t *testing.T, body []byte) {
		if d.Decode(append([][]byte{body}, auxFrames...), &o) != nil {
			return
		}
		enc, aux, err := AppendOutputs(nil, &o)
		if err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		var again EngineCoreOutputs
		if err := DecodeOutputs(append([][]byte{enc}, aux...), &again); err != nil {
			t.Fatalf("re-decode: %v\n%x", err, enc)
		}
		if d := cmp.Diff(o, again, fuzzOpts); d != "" {
			t.Fatalf("round trip changed the message:\n%s", d)
		}
	})
}

// fuzzSimple runs a decoder/encoder pair through the round-trip property.
func fuzzSimple[T any](f *testing.F, dec func([]byte) (T, error), enc func(T) []byte, prefixes ...string) {
	seedBodies(f, prefixes...)
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := dec(body)
		if err != nil {
			return
		}
		again, err := dec(enc(v))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if d := cmp.Diff(v, again, fuzzOpts); d != "" {
			t.Fatalf("round trip changed the value:\n%s", d)
		}
	})
}

func FuzzDecodeAbort(f *testing.F) {
	fuzzSimple(f, DecodeAbort, func(ids []string) []byte { return AppendAbort(nil, ids) }, "abort")
}

func FuzzDecodeUtility(f *testing.F) {
	type call struct {
		ci     int64
		id     uint64
		method string
		args   Raw
	}
	dec := func(b []byte) (call, error) {
		ci, id, m, args, err := DecodeUtility(b)
		return call{ci, id, m, args}, err
	}
	enc := func(c call) []byte {
		b, err := AppendUtility(nil, c.ci, c.id, c.method, c.args)
		if err != nil {
			panic(err)
		}
		return b
	}
	seedBodies(f, "utility_")
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := dec(body)
		if err != nil {
			return
		}
		again, err := dec(enc(c))
		if err != nil || again.ci != c.ci || again.id != c.id || again.method != c.method || !bytes.Equal(again.args, c.args) {
			t.Fatalf("round trip: %+v -> %+v, %v", c, again, err)
		}
	})
}

func FuzzDecodeStartDPWave(f *testing.F) {
	fuzzSimple(f, DecodeStartDPWave, func(w StartDPWave) []byte { return AppendStartDPWave(nil, w) }, "start_dp_wave")
}

func FuzzDecodeHandshakeStatus(f *testing.F) {
	fuzzSimple(f, DecodeHandshakeStatus, func(h HandshakeStatus) []byte { return AppendHandshakeStatus(nil, &h) }, "hello", "ready")
}

func FuzzDecodeInit(f *testing.F) {
	fuzzSimple(f, DecodeInit, func(in HandshakeInit) []byte { return AppendInit(nil, &in) }, "init")
}

func FuzzDecodeReadyResponse(f *testing.F) {
	fuzzSimple(f, DecodeReadyResponse, func(r ReadyResponse) []byte { return AppendReadyResponse(nil, &r) }, "registration")
}

func FuzzDecodeCoordinatorPublish(f *testing.F) {
	fuzzSimple(f, DecodeCoordinatorPublish, func(p CoordinatorPublish) []byte { return AppendCoordinatorPublish(nil, &p) }, "coordinator_publish")
}

func FuzzDecodeFirstReq(f *testing.F) {
	fuzzSimple(f, DecodeFirstReq, func(r FirstReq) []byte { return AppendFirstReq(nil, r) }, "first_req")
}

// FuzzSkip: skip and raw never panic, and raw returns exactly one well-formed value.
func FuzzSkip(f *testing.F) {
	seedBodies(f, "")
	f.Fuzz(func(t *testing.T, b []byte) {
		r := reader{b: b}
		v, err := r.raw()
		if err != nil {
			return
		}
		if v != nil && !validRaw(v) {
			t.Fatalf("raw returned a malformed value %x", v)
		}
	})
}

// ignoreKeys leaves out the decode-only key lists of the handshake maps: an encoder
// writes every key it knows, so a round trip may list more keys than went in.
var ignoreKeys = cmp.Options{cmpopts.IgnoreFields(HandshakeStatus{}, "Keys"), cmpopts.IgnoreFields(ReadyResponse{}, "Keys")}
