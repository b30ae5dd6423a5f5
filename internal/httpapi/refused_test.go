package httpapi

import (
	"errors"
	"strings"
	"testing"
)

// A request pinned to a rank whose engine was refused before it came up is told
// why, not only that the rank is not connected.
func TestPinnedToRefusedRank(t *testing.T) {
	f, ts := newParityAPI(t, 1, APIConfig{})
	f.D.EngineRefused(3, errors.New("engine speaks wire layout v2, this frontend v1"))
	resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`, RankHeader, "3")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "its engine was refused: engine speaks wire layout v2") ||
		!strings.Contains(string(body), "data parallel rank 3 is not connected") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
