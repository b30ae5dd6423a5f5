package wire

import "testing"

// A cross-encoder pair's type-id split travels in extra_kwargs in every layout and
// reads back; unset, extra_kwargs stays vLLM's None and is not written past task.
func TestPoolingTypeIDSplitRoundTrips(t *testing.T) {
	for _, l := range BuiltinLayouts() {
		p := &PoolingParams{Task: "classify", Activation: OptBool{Value: true, Valid: true}, CompressedTokenTypeIDs: SomeInt(9)}
		b, err := l.appendPooling(nil, p)
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		got, err := l.DecodePooling(b)
		if err != nil || got.CompressedTokenTypeIDs != p.CompressedTokenTypeIDs || got.Task != "classify" {
			t.Fatalf("%s: %+v %v", l.Name, got, err)
		}
		p.CompressedTokenTypeIDs = OptInt{}
		if b, err = l.appendPooling(nil, p); err != nil {
			t.Fatal(err)
		}
		if got, err = l.DecodePooling(b); err != nil || got.CompressedTokenTypeIDs.Valid {
			t.Fatalf("%s unset: %+v %v", l.Name, got, err)
		}
	}
}
