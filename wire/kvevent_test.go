package wire

import (
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var kvOpts = cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateNaNs()}

func kvEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if d := cmp.Diff(want, got, kvOpts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// TestKVFixtures: every golden payload of every release decodes to what its case
// says, and encoding the decoded batch as that release does gives msgspec's bytes
// (all but the bytes-hash cases: our encoder writes ints).
func TestKVFixtures(t *testing.T) {
	files := loadKVFixtures(t)
	if len(files) != 6 {
		t.Errorf("%d fixture files, want one per release (6)", len(files))
	}
	var d KVBatchDecoder
	for _, f := range files {
		for _, c := range f.Cases {
			t.Run(f.Label+"/"+c.Name, func(t *testing.T) {
				b, err := d.Decode(c.payload)
				if err != nil {
					t.Fatal(err)
				}
				checkKVWhat(t, c.What, b)
				if kvHasBytesHash(c.What) {
					return
				}
				got := AppendKVEventBatch(nil, f.enc, b)
				kvEqual(t, "re-encoding (hex)", hex.EncodeToString(got), c.PayloadHex)
			})
		}
	}
}

// TestKVFixtureFieldOrder: each release's declared field order is ours for its
// encoding, and its shape (arrays or maps) is the encoding's.
func TestKVFixtureFieldOrder(t *testing.T) {
	for _, f := range loadKVFixtures(t) {
		var stored, removed []string
		for _, x := range kvStoredFields[:f.enc.storedFields()] {
			stored = append(stored, kvFieldNames[x])
		}
		for _, x := range kvRemovedFields[:f.enc.removedFields()] {
			removed = append(removed, kvFieldNames[x])
		}
		kvEqual(t, f.Label+" BlockStored fields", stored, f.BlockStoredFields)
		kvEqual(t, f.Label+" BlockRemoved fields", removed, f.BlockRemovedFields)
		kvEqual(t, f.Label+" array_like", f.enc != KVEncodingMap, f.ArrayLike)
	}
}

// kvProject is b as encoding enc carries it: the fields enc lacks dropped.
func kvProject(b *KVEventBatch, enc KVEncoding) KVEventBatch {
	out := KVEventBatch{TS: b.TS, DataParallelRank: b.DataParallelRank}
	for _, e := range b.Events {
		if enc < KVEncodingV015 {
			e.LoRAName = OptString{}
		}
		if enc < KVEncodingV018 {
			e.ExtraKeys = nil
		}
		if enc < KVEncodingV021 {
			e.GroupIdx, e.SpecKind, e.SlidingWindow = OptInt{}, OptString{}, OptInt{}
		}
		out.Events = append(out.Events, e)
	}
	return out
}

// kvClone deep-copies a batch out of a decoder's reused scratch.
func kvClone(b *KVEventBatch) KVEventBatch {
	out := *b
	out.Events = nil
	for _, e := range b.Events {
		e.BlockHashes = append([]KVBlockHash(nil), e.BlockHashes...)
		e.TokenIDs = append([]int64(nil), e.TokenIDs...)
		if e.ExtraKeys != nil {
			e.ExtraKeys = append([]Raw{}, e.ExtraKeys...)
		}
		out.Events = append(out.Events, e)
	}
	return out
}

// TestKVCrossDecode: whatever any release sent, encoded as any other release would,
// decodes under the one decoder to the fields that release carries.
func TestKVCrossDecode(t *testing.T) {
	var d, again KVBatchDecoder
	for _, f := range loadKVFixtures(t) {
		for _, c := range f.Cases {
			b, err := d.Decode(c.payload)
			if err != nil {
				t.Fatalf("%s/%s: %v", f.Label, c.Name, err)
			}
			for enc := KVEncodingV011; enc <= KVEncodingMap; enc++ {
				got, err := again.Decode(AppendKVEventBatch(nil, enc, b))
				if err != nil {
					t.Fatalf("%s/%s as %v: %v", f.Label, c.Name, enc, err)
				}
				kvEqual(t, f.Label+"/"+c.Name+" as "+enc.String(), kvClone(got), kvProject(b, enc))
			}
		}
	}
}

// TestKVDecodeMixedShapes: one batch may hold array and map events of different
// releases, with the map's tag anywhere and keys the decoder does not know.
func TestKVDecodeMixedShapes(t *testing.T) {
	b := appendMapHeader(nil, 3)
	b = appendStr(b, "future_key")
	b = appendArrayHeader(b, 1)
	b = appendStr(b, "ignored")
	b = appendFloat(appendStr(b, "ts"), 1.5)
	b = appendArrayHeader(appendStr(b, "events"), 3)
	// v0.11's BlockRemoved, then a v0.21 one with a trailing field from a newer release.
	b = appendStr(appendArrayHeader(b, 3), "BlockRemoved")
	b = appendStr(appendInts(b, []int64{7}), "GPU")
	b = appendStr(appendArrayHeader(b, 5), "BlockRemoved")
	b = appendInt(appendNil(appendInts(b, []int64{8})), 2)
	b = appendStr(b, "a field of a later release")
	// A map event whose tag comes last, with an unknown key.
	b = appendMapHeader(b, 6)
	b = appendInts(appendStr(b, "block_hashes"), []int64{9})
	b = appendNil(appendStr(b, "parent_block_hash"))
	b = appendStr(appendStr(b, "new_thing"), "x")
	b = appendInts(appendStr(b, "token_ids"), []int64{1, 2})
	b = appendInt(appendStr(b, "block_size"), 2)
	b = appendStr(appendStr(b, "type"), "BlockStored")

	var d KVBatchDecoder
	got, err := d.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := KVEventBatch{TS: 1.5, Events: []KVEvent{
		{Kind: KVBlockRemoved, BlockHashes: []KVBlockHash{7}, Medium: SomeString("GPU")},
		{Kind: KVBlockRemoved, BlockHashes: []KVBlockHash{8}, GroupIdx: SomeInt(2)},
		{Kind: KVBlockStored, BlockHashes: []KVBlockHash{9}, TokenIDs: []int64{1, 2}, BlockSize: 2},
	}}
	kvEqual(t, "batch", kvClone(got), want)
}

func TestKVEncodingForLayout(t *testing.T) {
	for name, want := range map[string]KVEncoding{
		"v0.11": KVEncodingV011, "v0.12": KVEncodingV011, "v0.15": KVEncodingV015,
		"v0.18": KVEncodingV018, "v0.21": KVEncodingV021, "newest": KVEncodingMap, "0.18.0": KVEncodingV018,
	} {
		got, ok := KVEncodingForLayout(name)
		if !ok || got != want {
			t.Errorf("KVEncodingForLayout(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	for _, l := range LayoutNames() {
		if _, ok := KVEncodingForLayout(l); !ok {
			t.Errorf("built-in layout %q has no KV encoding", l)
		}
	}
	if _, ok := KVEncodingForLayout("v9.9"); ok {
		t.Error("an unknown layout has a KV encoding")
	}
	kvEqual(t, "names", []string{KVEncodingV011.String(), KVEncodingMap.String(), KVEncoding(9).String()},
		[]string{"v0.11", "newest", "KVEncoding(9)"})
	kvEqual(t, "kinds", []string{KVBlockStored.String(), KVAllBlocksCleared.String(), KVEventKind(0).String()},
		[]string{"BlockStored", "AllBlocksCleared", "KVEventKind(0)"})
	for r := KVSkipReason(0); r < KVSkipReasons; r++ {
		if kvSkipNames[r] == "" {
			t.Errorf("skip reason %d has no name", r)
		}
	}
}

// TestKVHashBytes: bytes hashes fold deterministically, differ from the int they
// spell, and distinct inputs (of any length, zero padding included) stay distinct.
func TestKVHashBytes(t *testing.T) {
	eight := []byte{0, 0, 0, 0, 0, 0, 0, 42}
	if KVHashBytes(eight) == 42 || KVHashBytes(eight) == KVHashBytes(eight[:7]) {
		t.Error("fold is not domain-separated from ints or length")
	}
	seen := map[KVBlockHash][]byte{}
	for n := range 40 {
		for bit := range n * 8 {
			b := make([]byte, n)
			b[bit/8] = 1 << (bit % 8)
			h := KVHashBytes(b)
			if prev, dup := seen[h]; dup {
				t.Fatalf("%x and %x fold to %d", prev, b, h)
			}
			seen[h] = b
		}
		seen[KVHashBytes(make([]byte, n))] = make([]byte, n)
	}
	if len(seen) != 40*39/2*8+40 {
		t.Errorf("%d distinct folds, want %d", len(seen), 40*39/2*8+40)
	}
}

func TestKVFrames(t *testing.T) {
	seq := AppendKVSeq(nil, 0x0102030405060708)
	kvEqual(t, "seq", hex.EncodeToString(seq), "0102030405060708")
	topic, n, payload, err := ParseKVEventMessage([][]byte{[]byte("kv"), seq, {0x90}})
	if err != nil || string(topic) != "kv" || n != 0x0102030405060708 || len(payload) != 1 {
		t.Errorf("ParseKVEventMessage = %q %x %x %v", topic, n, payload, err)
	}
	for _, bad := range [][][]byte{nil, {{}, seq}, {{}, seq[:7], {}}, {{}, seq, {}, {}}} {
		if _, _, _, err := ParseKVEventMessage(bad); err == nil {
			t.Errorf("ParseKVEventMessage(%x) accepted", bad)
		}
	}
	end := AppendKVSeq(nil, KVReplayEndSeq)
	kvEqual(t, "end marker", hex.EncodeToString(end), "ffffffffffffffff") // -1 as 8 signed bytes
	for _, fr := range [][][]byte{{seq, {1}}, {{}, seq, {1}}} {
		s, p, isEnd, err := ParseKVReplayReply(fr)
		if err != nil || s != 0x0102030405060708 || len(p) != 1 || isEnd {
			t.Errorf("ParseKVReplayReply(%x) = %x %x %v %v", fr, s, p, isEnd, err)
		}
	}
	if _, _, isEnd, err := ParseKVReplayReply([][]byte{{}, end, {}}); !isEnd || err != nil {
		t.Errorf("end marker: %v %v", isEnd, err)
	}
	for _, bad := range [][][]byte{{seq}, {{1}, seq, {}}, {seq[:3], {}}} {
		if _, _, _, err := ParseKVReplayReply(bad); err == nil {
			t.Errorf("ParseKVReplayReply(%x) accepted", bad)
		}
	}
	for in, want := range map[string]uint64{"0000000000000005": 5, "05": 5, "": 0, "00ffffffffffffffff": KVReplayEndSeq, "010000000000000000": KVReplayEndSeq} {
		b, _ := hex.DecodeString(in)
		got, err := ParseKVReplayRequest([][]byte{{}, b})
		if err != nil || got != want {
			t.Errorf("ParseKVReplayRequest(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseKVReplayRequest([][]byte{seq}); err == nil {
		t.Error("a request without the empty frame was accepted")
	}
}

// TestKVDecodeNoAllocs: a steady stream of batches decodes without allocating.
func TestKVDecodeNoAllocs(t *testing.T) {
	for _, enc := range []KVEncoding{KVEncodingV021, KVEncodingMap} {
		payload := AppendKVEventBatch(nil, enc, kvBenchBatch(32, 4, 16))
		var d KVBatchDecoder
		if _, err := d.Decode(payload); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = d.Decode(payload) }); n != 0 {
			t.Errorf("%v: %v allocations a batch", enc, n)
		}
	}
}
