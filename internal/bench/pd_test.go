package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The P/D mode runs both phases and reports a handoff per paired request.
func TestRunPD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three in-process servers")
	}
	r, err := RunPD(context.Background(), PDConfig{Decode: 1, Prefill: 1, Concurrency: 4, Duration: 300 * time.Millisecond,
		PromptTokens: 16, OutputTokens: 2, StepTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Handoff.N != r.Requests || r.ProxyRequests == 0 || r.ProxyHandoff.N != r.ProxyRequests {
		t.Fatalf("report %+v", r)
	}
	if r.Handoff.P50 <= 0 || r.Handoff.P50 > r.Handoff.Max {
		t.Errorf("handoff quantiles %+v", r.Handoff)
	}
	var b bytes.Buffer
	WritePD(&b, r)
	if !strings.Contains(b.String(), "handoff overhead per request") {
		t.Errorf("table:\n%s", b.String())
	}
	if _, err := RunPD(context.Background(), PDConfig{}); err == nil {
		t.Error("an empty config ran")
	}
}
