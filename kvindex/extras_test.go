package kvindex

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The extra_keys field of the v0.18 golden payload "extra_keys" (a BlockStored whose
// first block carries the cache salt "salt-abc"), as msgspec wrote it:
// [["salt-abc"], None].
const goldenExtraKeysHex = "92" + "91a873616c742d616263" + "c0"

func TestPromptExtraBytesAsMsgspecWritesThem(t *testing.T) {
	golden, _ := hex.DecodeString(goldenExtraKeysHex)
	first, _ := appendPromptExtra(nil, "", "salt-abc", true)
	if want := golden[1:11]; !bytes.Equal(first, want) {
		t.Errorf("first block = %x, want %x (the golden entry)", first, want)
	}
	if _, ok := appendPromptExtra(nil, "", "salt-abc", false); ok {
		t.Error("a later block carries the salt; vLLM puts it on the first block only")
	}
	tests := []struct {
		name       string
		lora, salt string
		first      bool
		want       string // hex; "" for None
	}{
		{"nothing is None", "", "", true, ""},
		{"empty salt adds nothing", "", "", true, ""},
		{"LoRA on a later block", "sql-adapter", "", false, "91ab73716c2d61646170746572"},
		{"LoRA then salt on the first block", "a", "s", true, "92a161a173"},
		{"str8 from 32 bytes", strings.Repeat("x", 32), "", false, "91d920" + strings.Repeat("78", 32)},
		{"str16 from 256 bytes", strings.Repeat("x", 256), "", false, "91da0100" + strings.Repeat("78", 256)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := appendPromptExtra(nil, tt.lora, tt.salt, tt.first)
			if tt.want == "" {
				if ok {
					t.Errorf("got %x, want None", got)
				}
				return
			}
			if hex.EncodeToString(got) != tt.want {
				t.Errorf("got %x, want %s", got, tt.want)
			}
		})
	}
}

// TestExtraKeysAcrossReleases stores the same two blocks as each release reports
// them and looks them up as prompts with and without LoRA and salt.
func TestExtraKeysAcrossReleases(t *testing.T) {
	toks := seq(1, 8)
	lora := func(first bool, salt string) []byte {
		b, _ := appendPromptExtra(nil, "sql-adapter", salt, first)
		return b
	}
	saltOnly, _ := appendPromptExtra(nil, "", "salt-abc", true)
	base := prompt(toks)
	withLoRA := &Query{Tokens: toks, StopAt: -1, LoRAName: "sql-adapter"}
	withSalt := &Query{Tokens: toks, StopAt: -1, CacheSalt: "salt-abc", HasSalt: true}
	loraSalt := &Query{Tokens: toks, StopAt: -1, LoRAName: "sql-adapter", CacheSalt: "salt-abc", HasSalt: true}
	emptySalt := &Query{Tokens: toks, StopAt: -1, HasSalt: true}
	otherLoRA := &Query{Tokens: toks, StopAt: -1, LoRAName: "other"}

	tests := []struct {
		name  string
		event Stored
		want  map[string]int // query → cached tokens
	}{
		{"v0.18 base model: extra_keys all None", Stored{Extra: [][]byte{nil, {0xc0}}},
			map[string]int{"base": 8, "empty salt": 8}},
		{"v0.18 salt on the first block", Stored{Extra: [][]byte{saltOnly, nil}},
			map[string]int{"salt": 8}},
		{"v0.18 LoRA", Stored{LoRAName: "sql-adapter", HasLoRAName: true, LoRAID: 7, HasLoRAID: true,
			Extra: [][]byte{lora(true, ""), lora(false, "")}},
			map[string]int{"lora": 8}},
		{"v0.18 LoRA and salt", Stored{LoRAName: "sql-adapter", HasLoRAName: true, LoRAID: 7, HasLoRAID: true,
			Extra: [][]byte{lora(true, "salt-abc"), lora(false, "salt-abc")}},
			map[string]int{"lora+salt": 8}},
		{"v0.15 LoRA by name, no extra_keys: derived", Stored{LoRAName: "sql-adapter", HasLoRAName: true, LoRAID: 7, HasLoRAID: true},
			map[string]int{"lora": 8}},
		{"v0.15 base model", Stored{},
			map[string]int{"base": 8, "empty salt": 8}},
		{"v0.11 LoRA by id only: never matches", Stored{LoRAID: 7, HasLoRAID: true},
			map[string]int{}},
		{"v0.11 base model", Stored{HasLoRAID: false},
			map[string]int{"base": 8, "empty salt": 8}},
	}
	queries := map[string]*Query{"base": base, "lora": withLoRA, "salt": withSalt,
		"lora+salt": loraSalt, "empty salt": emptySalt, "other lora": otherLoRA}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newTestIndex(t, Config{})
			s := tt.event
			s.Hashes, s.Tokens, s.BlockSize = []uint64{10, 11}, toks, bs
			if r := ix.Store(0, &s); r.Stored != 2 {
				t.Fatalf("Store = %+v", r)
			}
			got := map[string]int{}
			for name, q := range queries {
				if c := cached(ix, q)[0]; c > 0 {
					got[name] = c
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cached tokens per query (-want +got):\n%s", diff)
			}
		})
	}
}

// A salt sent before v0.18 cannot be seen: the salted request's blocks look like the
// unsalted ones (an over-prediction for unsalted prompts), and a salted prompt never
// matches (safe).
func TestSaltUnseenBeforeV018(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, 8)
	ix.Store(0, &Stored{Hashes: []uint64{10, 11}, Tokens: toks, BlockSize: bs})
	salted := &Query{Tokens: toks, StopAt: -1, CacheSalt: "tenant-a", HasSalt: true}
	if got := cached(ix, salted); len(got) != 0 {
		t.Errorf("salted prompt matched %v", got)
	}
	if got := cached(ix, prompt(toks)); got[0] != 8 {
		t.Errorf("unsalted prompt: %v", got)
	}
}

func TestMultimodalStop(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, 16)
	mm := []byte{0x91, 0x92, 0xa3, 'i', 'm', 'g', 0x02} // [("img", 2)]: not reproducible here
	ix.Store(0, &Stored{Hashes: []uint64{10, 11, 12, 13}, Tokens: toks, BlockSize: bs,
		Extra: [][]byte{nil, mm, mm, nil}})
	tests := []struct {
		stopAt int
		want   int
	}{
		{-1, 4},      // the walk reaches block 1, keyed without the mm key: no match there
		{6, 4},       // the image starts at token 6: block 1 (4..8) is not keyed
		{4, 4},       // block 0 ends at 4: keyed
		{3, 0},       // not even block 0
		{0, 0},       // prompt embeddings: nothing
		{100, 4},     // past the prompt: no stop
		{16, 4},      // at the end
		{8, 4},       // block 1 keyed, misses
		{5, 4},       // mid-block
		{-7, 4},      // any negative: none
		{1 << 30, 4}, // far
	}
	for _, tt := range tests {
		q := &Query{Tokens: toks, StopAt: tt.stopAt}
		if got := cached(ix, q)[0]; got != tt.want {
			t.Errorf("StopAt %d: cached %d, want %d", tt.stopAt, got, tt.want)
		}
	}
}

// Token ids past 32 bits (no vocabulary has them, a hostile event might) are hashed
// whole: blocks that differ only in high bits never share a key.
func TestTokensBeyond32Bits(t *testing.T) {
	k := newKeyer(1)
	k.reserve(32)
	for _, n := range []int{16, 32, 5} {
		a, b := seq(1, n), seq(1, n)
		b[n-1] += 1 << 32
		c := seq(1, n)
		c[0] = -c[0]
		if k.tokens(a) == k.tokens(b) || k.tokens(a) == k.tokens(c) || k.tokens(b) == k.tokens(c) {
			t.Errorf("%d tokens: high bits lost", n)
		}
	}
}
