package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The KV-event golden payloads in testdata/kv-events: one file per vLLM release, each
// made by that release's own kv_events.py classes and msgspec.

var kvFixtureDir = filepath.Join("testdata", "kv-events")

// kvFixtureFile is one release's file.
type kvFixtureFile struct {
	Label              string          `json:"label"`
	ArrayLike          bool            `json:"array_like"`
	BlockStoredFields  []string        `json:"block_stored_fields"`
	BlockRemovedFields []string        `json:"block_removed_fields"`
	Cases              []kvFixtureCase `json:"cases"`
	enc                KVEncoding
}

type kvFixtureCase struct {
	Name       string         `json:"name"`
	What       map[string]any `json:"what"`
	PayloadHex string         `json:"payload_hex"`
	payload    []byte
}

// loadKVFixtures reads every release's file. A missing directory fails under CI and
// skips otherwise.
func loadKVFixtures(t testing.TB) []kvFixtureFile {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(kvFixtureDir, "*.json"))
	if len(paths) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no KV-event fixtures in %s", kvFixtureDir)
		}
		t.Skipf("no KV-event fixtures in %s", kvFixtureDir)
	}
	var files []kvFixtureFile
	for _, p := range paths {
		files = append(files, readKVFixtureFile(t, p))
	}
	return files
}

func readKVFixtureFile(t testing.TB, path string) kvFixtureFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f kvFixtureFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // hashes exceed float64's 53 bits
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	release, _, _ := strings.Cut(f.Label, "-")
	enc, ok := KVEncodingForLayout(release)
	if !ok {
		t.Fatalf("%s: no KV encoding for release %q", path, release)
	}
	f.enc = enc
	for i := range f.Cases {
		c := &f.Cases[i]
		if c.payload, err = hex.DecodeString(c.PayloadHex); err != nil {
			t.Fatalf("%s/%s: %v", f.Label, c.Name, err)
		}
	}
	return f
}

// kvNamedHashes are the hashes the readable renderings call h1 and h2 (the
// stored_root_two_blocks case spells them out).
var kvNamedHashes = map[string]KVBlockHash{"h1": 0x123456789abcdef0, "h2": 42}

// checkKVWhat compares a decoded batch with a case's readable rendering. The
// rendering names only what the case is about, so only the keys it has are compared.
func checkKVWhat(t *testing.T, what map[string]any, b *KVEventBatch) {
	t.Helper()
	if mustFloat(t, what["ts"]) != b.TS {
		t.Errorf("ts = %v, want %v", b.TS, what["ts"])
	}
	wantRank := OptInt{}
	if v, ok := what["data_parallel_rank"]; ok {
		wantRank = SomeInt(kvNum(t, v))
	}
	if b.DataParallelRank != wantRank {
		t.Errorf("data_parallel_rank = %+v, want %+v", b.DataParallelRank, wantRank)
	}
	evs := what["events"].([]any)
	if len(b.Events) != len(evs) {
		t.Fatalf("%d events, want %d (skipped %v)", len(b.Events), len(evs), b.Skipped)
	}
	for i, w := range evs {
		switch w := w.(type) {
		case string:
			checkKVShorthand(t, w, &b.Events[i])
		case map[string]any:
			for k, v := range w {
				checkKVKey(t, i, k, v, &b.Events[i])
			}
		}
	}
	if b.Skipped != [KVSkipReasons]int{} {
		t.Errorf("skipped %v, want none", b.Skipped)
	}
}

// checkKVShorthand checks a rendering such as "BlockStored h1 [1..4] root" or
// "BlockRemoved [h1]".
func checkKVShorthand(t *testing.T, w string, e *KVEvent) {
	t.Helper()
	parts := strings.Fields(w)
	if e.Kind.String() != parts[0] {
		t.Errorf("%q: kind %v", w, e.Kind)
	}
	var hashes []KVBlockHash
	for _, p := range parts[1:] {
		switch {
		case p == "root":
			if e.HasParent {
				t.Errorf("%q: has parent %d", w, e.Parent)
			}
		case strings.HasPrefix(p, "[h"):
			hashes = append(hashes, kvNamedHashes[strings.Trim(p, "[]")])
		case strings.HasPrefix(p, "["):
			lo, hi, _ := strings.Cut(strings.Trim(p, "[]"), "..")
			a, _ := strconv.Atoi(lo)
			z, _ := strconv.Atoi(hi)
			var toks []int64
			for v := a; v <= z; v++ {
				toks = append(toks, int64(v))
			}
			kvEqual(t, w+" token_ids", e.TokenIDs, toks)
		default:
			hashes = append(hashes, kvNamedHashes[p])
		}
	}
	kvEqual(t, w+" block_hashes", e.BlockHashes, hashes)
}

// checkKVKey checks one key of an event's rendering.
func checkKVKey(t *testing.T, i int, k string, v any, e *KVEvent) {
	t.Helper()
	name := "event " + strconv.Itoa(i) + " " + k
	switch k {
	case "type":
		kvEqual(t, name, e.Kind.String(), v.(string))
	case "note":
	case "block_hashes":
		var want []KVBlockHash
		for _, h := range v.([]any) {
			want = append(want, kvWantHash(t, h))
		}
		kvEqual(t, name, e.BlockHashes, want)
	case "parent_block_hash":
		kvEqual(t, name, e.HasParent, v != nil)
		if v != nil {
			kvEqual(t, name, e.Parent, kvWantHash(t, v))
		}
	case "token_ids":
		var want []int64
		for _, x := range v.([]any) {
			want = append(want, kvNum(t, x))
		}
		kvEqual(t, name, e.TokenIDs, want)
	case "block_size":
		kvEqual(t, name, e.BlockSize, kvNum(t, v))
	case "lora_id", "group_idx", "kv_cache_spec_sliding_window":
		got := map[string]OptInt{"lora_id": e.LoRAID, "group_idx": e.GroupIdx, "kv_cache_spec_sliding_window": e.SlidingWindow}[k]
		kvEqual(t, name, got, kvWantOptInt(t, v))
	case "medium", "lora_name", "kv_cache_spec_kind":
		got := map[string]OptString{"medium": e.Medium, "lora_name": e.LoRAName, "kv_cache_spec_kind": e.SpecKind}[k]
		want := OptString{}
		if v != nil {
			want = SomeString(v.(string))
		}
		kvEqual(t, name, got, want)
	case "extra_keys":
		var got, want []string
		for _, r := range e.ExtraKeys {
			got = append(got, hex.EncodeToString(r))
		}
		for _, x := range v.([]any) {
			if x == nil {
				want = append(want, "")
			} else {
				want = append(want, hex.EncodeToString(kvMsgpackOf(t, x)))
			}
		}
		kvEqual(t, name, got, want)
	default:
		t.Errorf("%s: the rendering has a key this test does not know", name)
	}
}

// kvMsgpackOf encodes a JSON value of a rendering (strings, ints, lists, null) as
// msgspec would.
func kvMsgpackOf(t *testing.T, v any) []byte {
	switch v := v.(type) {
	case nil:
		return appendNil(nil)
	case string:
		return appendStr(nil, v)
	case json.Number:
		return appendInt(nil, kvNum(t, v))
	case []any:
		b := appendArrayHeader(nil, len(v))
		for _, x := range v {
			b = append(b, kvMsgpackOf(t, x)...)
		}
		return b
	}
	t.Fatalf("cannot encode %T", v)
	return nil
}

// kvWantHash reads a rendered hash: an int, or a bytes hash as hex.
func kvWantHash(t *testing.T, v any) KVBlockHash {
	if s, ok := v.(string); ok {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return KVHashBytes(b)
	}
	u, err := strconv.ParseUint(string(v.(json.Number)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return KVBlockHash(u)
}

// kvHasBytesHash reports a rendering with a bytes hash, which our encoder (ints
// only) cannot reproduce.
func kvHasBytesHash(what map[string]any) bool {
	for _, e := range what["events"].([]any) {
		if m, ok := e.(map[string]any); ok {
			if hs, ok := m["block_hashes"].([]any); ok && len(hs) > 0 {
				if _, isStr := hs[0].(string); isStr {
					return true
				}
			}
		}
	}
	return false
}

func kvWantOptInt(t *testing.T, v any) OptInt {
	if v == nil {
		return OptInt{}
	}
	return SomeInt(kvNum(t, v))
}

func kvNum(t *testing.T, v any) int64 {
	n, err := strconv.ParseInt(string(v.(json.Number)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustFloat(t *testing.T, v any) float64 {
	f, err := v.(json.Number).Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}
