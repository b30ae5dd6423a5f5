package wire

import (
	"bytes"
	"testing"
	"unsafe"
)

// Hostile and malformed KV-event payloads: an event that does not decode is counted
// and stepped over, a payload that is not a batch is an error, nothing panics, and
// what the decoder holds stays proportional to the payload.

// kvBatchOf wraps encoded events in a v0.21-shaped batch.
func kvBatchOf(events ...[]byte) []byte {
	b := appendArrayHeader(appendFloat(appendArrayHeader(nil, 3), 1), len(events))
	for _, e := range events {
		b = append(b, e...)
	}
	return appendNil(b)
}

// kvEv encodes [tag, fields...] from already-encoded fields.
func kvEv(tag string, fields ...[]byte) []byte {
	b := appendStr(appendArrayHeader(nil, 1+len(fields)), tag)
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

// kvMap encodes a map from alternating encoded keys and values.
func kvMap(kv ...[]byte) []byte {
	b := appendMapHeader(nil, len(kv)/2)
	for _, x := range kv {
		b = append(b, x...)
	}
	return b
}

func kvInts(v ...int64) []byte  { return appendInts(nil, v) }
func kvInt(v int64) []byte      { return appendInt(nil, v) }
func kvStr(s string) []byte     { return appendStr(nil, s) }
func kvArr(v ...[]byte) []byte  { return append(appendArrayHeader(nil, len(v)), bytes.Join(v, nil)...) }
func kvNested(depth int) []byte { return append(bytes.Repeat([]byte{0x91}, depth), 0xc0) }
func kvHdr(c byte, n int) []byte {
	return append([]byte{c}, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
func kvStored(rest ...[]byte) []byte { return kvEv("BlockStored", rest...) }

var (
	kvNil     = []byte{0xc0}
	kvTok4    = kvInts(1, 2, 3, 4)
	kvGood    = kvStored(kvInts(1), kvNil, kvTok4, kvInt(4))
	kvTypeKey = kvStr("type")
)

type kvHostileCase struct {
	name      string
	event     []byte // placed before a good event in a batch; or
	payload   []byte // the whole payload
	maxBlocks int
	wantErr   bool
	skip      KVSkipReason
	kept      bool // the event decodes after all: 2 kept, none skipped
}

var kvHostileCases = []kvHostileCase{
	{name: "unknown tag", event: kvEv("BlockMoved", kvInts(1)), skip: KVSkipUnknownTag},
	{name: "map unknown type", event: kvMap(kvTypeKey, kvStr("Nope")), skip: KVSkipUnknownTag},
	{name: "tag not a str", event: kvArr(kvInt(7), kvInts(1)), skip: KVSkipMalformed},
	{name: "empty event", event: kvArr(), skip: KVSkipMalformed},
	{name: "event is an int", event: kvInt(5), skip: KVSkipMalformed},
	{name: "event is nil", event: kvNil, skip: KVSkipMalformed},
	{name: "map without type", event: kvMap(kvStr("block_hashes"), kvInts(1)), skip: KVSkipMalformed},
	{name: "map key not a str", event: kvMap(kvInt(1), kvInt(2), kvTypeKey, kvStr("AllBlocksCleared")), skip: KVSkipMalformed},
	{name: "stored without block_size", event: kvStored(kvInts(1), kvNil, kvTok4), skip: KVSkipMalformed},
	{name: "map stored without parent", event: kvMap(kvTypeKey, kvStr("BlockStored"), kvStr("block_hashes"), kvInts(1),
		kvStr("token_ids"), kvTok4, kvStr("block_size"), kvInt(4)), skip: KVSkipMalformed},
	{name: "removed without hashes", event: kvEv("BlockRemoved"), skip: KVSkipMalformed},
	{name: "block_size a str", event: kvStored(kvInts(1), kvNil, kvTok4, kvStr("4")), skip: KVSkipWrongType},
	{name: "block_size nil", event: kvStored(kvInts(1), kvNil, kvTok4, kvNil), skip: KVSkipWrongType},
	{name: "hash a str", event: kvStored(kvArr(kvStr("h")), kvNil, kvTok4, kvInt(4)), skip: KVSkipWrongType},
	{name: "hash a float", event: kvEv("BlockRemoved", kvArr(appendFloat(nil, 1))), skip: KVSkipWrongType},
	{name: "parent a list", event: kvStored(kvInts(1), kvInts(2), kvTok4, kvInt(4)), skip: KVSkipWrongType},
	{name: "hashes not a list", event: kvEv("BlockRemoved", kvInt(1)), skip: KVSkipWrongType},
	{name: "token a float", event: kvStored(kvInts(1), kvNil, kvArr(appendFloat(nil, 1), kvInt(2), kvInt(3), kvInt(4)), kvInt(4)), skip: KVSkipWrongType},
	{name: "token past int64", event: kvStored(kvInts(1), kvNil, kvArr(appendUint(nil, 1<<63), kvInt(2), kvInt(3), kvInt(4)), kvInt(4)), skip: KVSkipWrongType},
	{name: "medium an int", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvInt(1)), skip: KVSkipWrongType},
	{name: "lora_id a str", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvStr("7")), skip: KVSkipWrongType},
	{name: "extra_keys entry an int", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, kvArr(kvInt(1))), skip: KVSkipWrongType},
	{name: "extra_keys a map", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, kvMap()), skip: KVSkipWrongType},
	{name: "group_idx a str", event: kvEv("BlockRemoved", kvInts(1), kvNil, kvStr("0")), skip: KVSkipWrongType},
	{name: "too few tokens", event: kvStored(kvInts(1), kvNil, kvInts(1, 2, 3), kvInt(4)), skip: KVSkipTokenCount},
	{name: "too many tokens", event: kvStored(kvInts(1, 2), kvNil, kvInts(1, 2, 3, 4, 5, 6, 7, 8, 9), kvInt(4)), skip: KVSkipTokenCount},
	{name: "block_size zero", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(0)), skip: KVSkipTokenCount},
	{name: "block_size negative", event: kvStored(kvInts(1, 2), kvNil, kvTok4, kvInt(-2)), skip: KVSkipTokenCount},
	{name: "block_size overflowing", event: kvStored(kvInts(1, 2, 3, 4), kvNil, kvTok4, kvInt(1<<62)), skip: KVSkipTokenCount},
	{name: "tokens without blocks", event: kvStored(kvInts(), kvNil, kvTok4, kvInt(4)), skip: KVSkipTokenCount},
	{name: "too many blocks", maxBlocks: 2, event: kvStored(kvInts(1, 2, 3), kvNil, kvInts(1, 2, 3), kvInt(1)), skip: KVSkipTooManyBlocks},
	{name: "too many removed", maxBlocks: 2, event: kvEv("BlockRemoved", kvInts(1, 2, 3)), skip: KVSkipTooManyBlocks},
	{name: "extra_keys not one per block", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, kvArr(kvNil, kvNil)), skip: KVSkipExtraKeys},
	{name: "deep extra key", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, kvArr(kvNested(100_000))), kept: true},
	{name: "deep trailing field", event: kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, kvNil, kvNil, kvNil, kvNil, kvNested(100_000)), kept: true},
	{name: "deep unknown key", event: kvMap(kvTypeKey, kvStr("BlockRemoved"), kvStr("x"), kvNested(100_000), kvStr("block_hashes"), kvInts(1)), kept: true},
	{name: "deep non-event", event: kvNested(100_000), skip: KVSkipMalformed},
	{name: "empty blocks", event: kvStored(kvInts(), kvNil, kvInts(), kvInt(0)), kept: true},

	{name: "empty payload", payload: []byte{}, wantErr: true},
	{name: "payload an int", payload: kvInt(3), wantErr: true},
	{name: "payload a str", payload: kvStr("batch"), wantErr: true},
	{name: "batch of one field", payload: kvArr(appendFloat(nil, 1)), wantErr: true},
	{name: "map batch without events", payload: kvMap(kvStr("ts"), appendFloat(nil, 1)), wantErr: true},
	{name: "map batch without ts", payload: kvMap(kvStr("events"), kvArr()), wantErr: true},
	{name: "ts a str", payload: kvArr(kvStr("now"), kvArr()), wantErr: true},
	{name: "events a map", payload: kvArr(appendFloat(nil, 1), kvMap()), wantErr: true},
	{name: "rank a str", payload: kvArr(appendFloat(nil, 1), kvArr(), kvStr("0")), wantErr: true},
	{name: "huge batch header", payload: kvHdr(0xdd, 1<<31), wantErr: true},
	{name: "huge events header", payload: append(appendFloat(appendArrayHeader(nil, 2), 1), kvHdr(0xdd, 1<<30)...), wantErr: true},
	{name: "huge hashes header", payload: kvBatchOf(append(appendStr(appendArrayHeader(nil, 2), "BlockRemoved"), kvHdr(0xdd, 1<<30)...)), wantErr: true},
	{name: "huge tokens header", payload: kvBatchOf(append(appendNil(appendInts(appendStr(appendArrayHeader(nil, 5), "BlockStored"), []int64{1})), kvHdr(0xdd, 1<<30)...)), wantErr: true},
	{name: "huge tag length", payload: kvBatchOf(append(appendArrayHeader(nil, 1), kvHdr(0xdb, 1<<30)...)), wantErr: true},
	{name: "huge bytes hash", payload: kvBatchOf(append(appendArrayHeader(appendStr(appendArrayHeader(nil, 2), "BlockRemoved"), 1), kvHdr(0xc6, 1<<30)...)), wantErr: true},
	{name: "trailing bytes", payload: append(kvBatchOf(kvGood), 0xc0), wantErr: true},
	{name: "invalid type byte", payload: kvBatchOf([]byte{0xc1}), wantErr: true},
}

func TestKVHostile(t *testing.T) {
	for _, tt := range kvHostileCases {
		t.Run(tt.name, func(t *testing.T) {
			d := KVBatchDecoder{MaxBlocksPerEvent: tt.maxBlocks}
			payload := tt.payload
			if payload == nil {
				payload = kvBatchOf(tt.event, kvGood)
			}
			b, err := d.Decode(payload)
			if tt.wantErr {
				if err == nil || b != nil {
					t.Fatalf("decoded %+v, want an error", b)
				}
				if _, ok := err.(*DecodeError); !ok {
					t.Errorf("error %T %v, want *DecodeError", err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want [KVSkipReasons]int
			wantKept := 2
			if !tt.kept {
				want[tt.skip], wantKept = 1, 1
			}
			if b.Skipped != want || len(b.Events) != wantKept {
				t.Fatalf("kept %d, skipped %v; want %d, %v", len(b.Events), b.Skipped, wantKept, want)
			}
			last := b.Events[len(b.Events)-1]
			if last.Kind != KVBlockStored || len(last.TokenIDs) != 4 || last.BlockHashes[0] != 1 {
				t.Errorf("the good event after it decoded as %+v", last)
			}
			checkKVFootprint(t, &d, len(payload))
		})
	}
}

// TestKVTruncated: no strict prefix of a batch is a batch, and none panics.
func TestKVTruncated(t *testing.T) {
	payloads := [][]byte{AppendKVEventBatch(nil, KVEncodingV021, kvBenchBatch(2, 2, 4)), AppendKVEventBatch(nil, KVEncodingMap, kvBenchBatch(2, 2, 4))}
	for _, tt := range kvHostileCases {
		if tt.event != nil && len(tt.event) < 1000 { // every prefix: quadratic
			payloads = append(payloads, kvBatchOf(tt.event, kvGood))
		}
	}
	var d KVBatchDecoder
	for _, p := range payloads {
		if _, err := d.Decode(p); err != nil {
			t.Fatalf("whole payload: %v", err)
		}
		for n := range len(p) {
			if b, err := d.Decode(p[:n]); err == nil {
				t.Fatalf("prefix %d of %x decoded: %+v", n, p, b)
			}
		}
	}
}

// TestKVMemoryBound: payloads built to make the decoder hold as much as it can per
// byte stay within the bound the fuzz target checks.
func TestKVMemoryBound(t *testing.T) {
	const n = 20_000
	cleared := kvEv("AllBlocksCleared")
	removed := kvEv("BlockRemoved", kvInts())
	var many, manyRemoved, kvOnes [][]byte
	for range n {
		many, manyRemoved, kvOnes = append(many, cleared), append(manyRemoved, removed), append(kvOnes, kvInt(1))
	}
	nils := bytes.Repeat(kvNil, n)
	hashes := bytes.Repeat([]byte{1}, n)
	for name, p := range map[string][]byte{
		"cleared events":  kvBatchOf(many...),
		"removed events":  kvBatchOf(manyRemoved...),
		"ints as events":  kvBatchOf(kvOnes...),
		"nil extra keys":  kvBatchOf(kvStored(kvInts(1), kvNil, kvTok4, kvInt(4), kvNil, kvNil, kvNil, append(kvHdr(0xdd, n), nils...))),
		"one-byte hashes": kvBatchOf(kvEv("BlockRemoved", append(kvHdr(0xdd, n), hashes...))),
		"one-byte tokens": kvBatchOf(kvStored(kvInts(1), kvNil, append(kvHdr(0xdd, n), hashes...), kvInt(n))),
	} {
		var d KVBatchDecoder
		if _, err := d.Decode(p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkKVFootprint(t, &d, len(p))
	}
}

// kvFootprint is what a decoder holds for its last payload, in bytes.
func kvFootprint(d *KVBatchDecoder) int {
	return cap(d.batch.Events)*int(unsafe.Sizeof(KVEvent{})) + cap(d.hashes)*8 + cap(d.tokens)*8 +
		cap(d.extra)*int(unsafe.Sizeof(Raw{})) + cap(d.spans)*int(unsafe.Sizeof(kvSpan{}))
}

// kvFootprintBound: the most a payload byte can make the decoder hold is a 24-byte
// Raw per one-byte nil extra key, doubled by append's growth (48); a kept event
// (224 bytes and a 48-byte span) takes at least 15 bytes (18). The constant covers
// the first allocations of a tiny payload.
func kvFootprintBound(payload int) int { return 64*payload + 4096 }

func checkKVFootprint(t *testing.T, d *KVBatchDecoder, payload int) {
	t.Helper()
	if got := kvFootprint(d); got > kvFootprintBound(payload) {
		t.Errorf("decoder holds %d bytes for a %d-byte payload (bound %d)", got, payload, kvFootprintBound(payload))
	}
}
