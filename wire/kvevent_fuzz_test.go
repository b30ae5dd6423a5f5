package wire

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzKVEventBatch: no payload panics the decoder or makes it hold more than the
// payload's size allows, and a decoded batch re-encoded (in both shapes that carry
// every field) decodes to the same batch.
//
//	go test -run '^$' -fuzz '^FuzzKVEventBatch$' -fuzztime 60s ./wire/
func FuzzKVEventBatch(f *testing.F) {
	for _, p := range kvSeedPayloads(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d KVBatchDecoder
		b, err := d.Decode(payload)
		if err != nil {
			return
		}
		checkKVFootprint(t, &d, len(payload))
		want := kvClone(b)
		want.Skipped = [KVSkipReasons]int{} // the re-encoding holds only what was kept
		for _, enc := range []KVEncoding{KVEncodingV021, KVEncodingMap} {
			var again KVBatchDecoder
			body := AppendKVEventBatch(nil, enc, b)
			got, err := again.Decode(body)
			if err != nil {
				t.Fatalf("%v re-encoding does not decode: %v\n%x", enc, err, body)
			}
			kvEqual(t, enc.String()+" round trip", kvClone(got), want)
			for i := range got.Events {
				if (got.Events[i].ExtraKeys == nil) != (want.Events[i].ExtraKeys == nil) {
					t.Fatalf("%v round trip: event %d extra_keys absent became present or back", enc, i)
				}
			}
		}
	})
}

// kvSeedPayloads is every golden payload (when the shared fixtures are there; under
// CI they must be), the hostile table's and a few of our own encoder's.
func kvSeedPayloads(tb testing.TB) [][]byte {
	var seeds [][]byte
	paths, _ := filepath.Glob(filepath.Join(kvFixtureDir, "*.json"))
	if len(paths) == 0 && os.Getenv("CI") == "true" {
		tb.Fatalf("no KV-event fixtures in %s", kvFixtureDir)
	}
	for _, p := range paths {
		for _, c := range readKVFixtureFile(tb, p).Cases {
			seeds = append(seeds, c.payload)
		}
	}
	for _, tt := range kvHostileCases {
		if tt.event != nil && len(tt.event) < 1000 { // the fuzzer grows its own depth
			seeds = append(seeds, kvBatchOf(tt.event, kvGood))
		}
	}
	for enc := KVEncodingV011; enc <= KVEncodingMap; enc++ {
		seeds = append(seeds, AppendKVEventBatch(nil, enc, kvBenchBatch(2, 2, 4)))
	}
	return seeds
}
