package dispatcher

import "testing"

func TestPDPolicyDecide(t *testing.T) {
	p := pdPolicy{minPromptTokens: 8, busyScore: 4}
	for _, c := range []struct {
		name     string
		prompt   int
		ready    int
		minScore float64
		want     PDReason
	}{
		{"long prompt, idle prefill", 100, 2, 0, PDRemote},
		{"short prompt", 7, 2, 0, PDShortPrompt},
		{"exactly the minimum", 8, 1, 0, PDRemote},
		{"no prefill engine", 100, 0, 0, PDNoPrefill},
		{"every prefill busy", 100, 2, 4, PDPrefillBusy},
		{"one prefill below the threshold", 100, 2, 3.5, PDRemote},
		{"short beats busy", 3, 2, 9, PDShortPrompt},
	} {
		if got := p.decide(c.prompt, c.ready, c.minScore); got != c.want {
			t.Errorf("%s: decide = %v, want %v", c.name, got, c.want)
		}
	}
	if got := (pdPolicy{}).decide(0, 1, 1e9); got != PDRemote {
		t.Errorf("no thresholds: %v, want remote", got)
	}
}

func TestPDPairTransitions(t *testing.T) {
	type step struct {
		ev   pdEvent
		sent bool // a leg was sent before the event
		act  pdAction
	}
	for _, c := range []struct {
		name   string
		legs   int
		steps  []step
		phase  pdPhase
		reason PDReason
	}{
		{"prefill then decode", 2, []step{{evPrefillFinished, true, actSendDecode}}, phDecode, PDRemote},
		{"no params: local", 2, []step{{evPrefillNoParams, true, actSendLocal}}, phDecode, PDNoKVParams},
		{"one failure, retried, then decode", 2, []step{
			{evPrefillFailed, true, actRetryPrefill}, {evPrefillFinished, true, actSendDecode}}, phDecode, PDRemote},
		{"every leg failed: local", 2, []step{
			{evPrefillFailed, true, actRetryPrefill}, {evPrefillFailed, true, actSendLocal}}, phDecode, PDPrefillFailed},
		{"one leg allowed", 1, []step{{evPrefillFailed, true, actSendLocal}}, phDecode, PDPrefillFailed},
		{"abort while prefilling", 2, []step{{evAbort, true, actAbortPrefill}}, phDone, PDRemote},
		{"abort after the handoff is the decode leg's", 2, []step{
			{evPrefillFinished, true, actSendDecode}, {evAbort, false, actNone}}, phDecode, PDRemote},
		{"late failure after the handoff", 2, []step{
			{evPrefillFinished, true, actSendDecode}, {evPrefillFailed, false, actNone}}, phDecode, PDRemote},
		{"events after an abort change nothing", 2, []step{
			{evAbort, true, actAbortPrefill}, {evPrefillFinished, false, actNone}, {evAbort, false, actNone}}, phDone, PDRemote},
	} {
		p := pdPair{maxLegs: c.legs}
		for i, s := range c.steps {
			if s.sent {
				p.legSent()
			}
			if got := p.on(s.ev); got != s.act {
				t.Errorf("%s: step %d: action %d, want %d", c.name, i, got, s.act)
			}
		}
		if p.phase != c.phase || p.reason != c.reason {
			t.Errorf("%s: phase %d reason %v, want %d %v", c.name, p.phase, p.reason, c.phase, c.reason)
		}
	}
}

func TestPDReasonNames(t *testing.T) {
	for r := range numPDReasons {
		if r.String() == "" || r.String() == "unknown" {
			t.Errorf("reason %d has no name", r)
		}
	}
}
