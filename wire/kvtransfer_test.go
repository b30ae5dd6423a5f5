package wire

import (
	"bytes"
	"testing"
)

func TestAppendExtraArgsWith(t *testing.T) {
	params := AppendPrefillKVParams(nil, "t-1")
	// {"a": 1, "kv_transfer_params": nil}
	extra := Raw{0x82, 0xa1, 'a', 0x01}
	extra = appendStr(extra, KVTransferParamsKey)
	extra = append(extra, 0xc0)
	for _, c := range []struct {
		name  string
		extra Raw
		keep  Raw // entries kept before ours
	}{
		{"no extra_args", nil, nil},
		{"nil extra_args", Raw{0xc0}, nil},
		{"empty map", Raw{0x80}, nil},
		{"an entry kept, ours replaced", extra, Raw{0xa1, 'a', 0x01}},
	} {
		got, err := AppendExtraArgsWith(nil, c.extra, params)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := 1
		if c.keep != nil {
			n = 2
		}
		want := appendMapHeader(nil, n)
		want = append(want, c.keep...)
		want = appendStr(want, KVTransferParamsKey)
		want = append(want, params...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got % x, want % x", c.name, got, want)
		}
		if v, ok := KVParam(got, KVTransferParamsKey); !ok || !bytes.Equal(v, params) {
			t.Errorf("%s: KVParam = % x, %v", c.name, v, ok)
		}
	}
	if _, err := AppendExtraArgsWith(nil, Raw{0x91, 0x01}, params); err == nil {
		t.Error("an array as extra_args accepted")
	}
	if _, err := AppendExtraArgsWith(nil, nil, nil); err == nil {
		t.Error("empty params accepted")
	}
	if v, ok := KVParam(params, "transfer_id"); !ok || !bytes.Equal(v, appendStr(nil, "t-1")) {
		t.Errorf("transfer_id = % x %v", v, ok)
	}
	if _, ok := KVParam(params, "nope"); ok {
		t.Error("a missing key found")
	}
	if _, ok := KVParam(Raw{0xc1}, "x"); ok {
		t.Error("garbage parsed")
	}
}
