package dispatcher

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-llm/switchyard/wire"
)

// A migrating request keeps its encoding, not the caller's request, and decodes
// back to the request as submitted: the caller's sampling params, not the capped
// ones that were sent.
func TestOrigCopyCompacts(t *testing.T) {
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1000)
	sp.Temperature = 0.5
	sp.StopTokenIDs = []int64{7, 8}
	sp.Normalize()
	req := &wire.EngineCoreRequest{RequestID: "r1", PromptTokenIDs: []int64{1, 2, 300000}, Sampling: &sp, ArrivalTime: 12.5}
	want := *req
	wantSP := sp
	capped, err := capMaxTokens(&sp, 3, 100)
	if err != nil || capped == &sp {
		t.Fatalf("capMaxTokens: %v (not capped: %v)", err, capped == &sp)
	}
	for _, tc := range []struct {
		name string
		sent *wire.SamplingParams
	}{{"as submitted", &sp}, {"capped", capped}} {
		sent := *req
		sent.Sampling = tc.sent
		body, aux, err := wire.Native().AppendAdd(nil, &sent)
		if err != nil {
			t.Fatal(err)
		}
		o := &origCopy{req: &sent}
		o.compact(&sent, &sp, wire.Native(), body, aux)
		if o.req != nil || len(o.add) == 0 || o.unmovable() != "" {
			t.Fatalf("%s: not compacted: %+v", tc.name, o)
		}
		body[0] ^= 0xff // the sent body is recycled: the copy must not share it
		got, err := o.request()
		if err != nil {
			t.Fatal(err)
		}
		w := want
		w.Sampling = &wantSP
		if diff := cmp.Diff(&w, got); diff != "" {
			t.Errorf("%s: decoded request (-want +got):\n%s", tc.name, diff)
		}
	}
	// An unmovable request keeps only the reason.
	pl := *req
	psp := sp
	psp.PromptLogprobs = wire.SomeInt(1)
	pl.Sampling = &psp
	o := &origCopy{req: &pl}
	o.compact(&pl, &psp, wire.Native(), nil, nil)
	if o.req != nil || o.add != nil || o.unmovable() == "" {
		t.Fatalf("unmovable request: %+v", o)
	}
}
