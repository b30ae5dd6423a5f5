package jinja

import (
	"fmt"
	"testing"
)

// TestCandidates renders every case with jinja2 and with each candidate and
// logs how many are byte-equal (or an error on both sides, as the reference
// counts a failure). Only chattemplate is required to match them all.
func TestCandidates(t *testing.T) {
	tcases, scases := templateCases(t), snippetCases(t)
	cases := append(tcases, scases...)
	res := runReference(t, cases)
	for _, cd := range candidates {
		var tpass, spass, panics int
		var firstFails []string
		var firstDetail string
		for i, c := range cases {
			got, err, panicked := safeRender(cd, c)
			if panicked {
				panics++
			}
			ok := (res[i].Error != nil && err != nil) || (res[i].Error == nil && err == nil && got == *res[i].Out)
			switch {
			case ok && i < len(tcases):
				tpass++
			case ok:
				spass++
			default:
				if firstDetail == "" {
					firstDetail = miss(c.label, got, err, res[i])
				}
				if len(firstFails) < 8 {
					firstFails = append(firstFails, c.label)
				}
			}
		}
		t.Logf("%-42s templates %d/%d, snippets %d/%d, all %d/%d, panics %d; first misses %v",
			cd.name, tpass, len(tcases), spass, len(scases), tpass+spass, len(cases), panics, firstFails)
		if firstDetail != "" {
			t.Logf("%s: first miss %s", cd.name, firstDetail)
		}
		if cd.name == candidates[0].name && tpass+spass != len(cases) {
			t.Errorf("chattemplate missed %d of %d cases: %v", len(cases)-tpass-spass, len(cases), firstFails)
		}
	}
}

// miss says how a case went wrong: an error on one side only, or where the
// output first differs.
func miss(label, got string, err error, want refResult) string {
	switch {
	case err != nil:
		return fmt.Sprintf("%s: candidate failed where jinja2 rendered: %.200v", label, err)
	case want.Error != nil:
		return fmt.Sprintf("%s: candidate rendered where jinja2 failed (%.120s)", label, *want.Error)
	}
	w := *want.Out
	i := 0
	for i < len(got) && i < len(w) && got[i] == w[i] {
		i++
	}
	return fmt.Sprintf("%s: differs at byte %d: got %.60q, want %.60q", label, i, got[i:], w[i:])
}
