package httpapi

import (
	"encoding/hex"
	"sort"
	"strings"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"time"

	"github.com/switchyard-llm/switchyard/internal/kvroute"
)

// EngineView is one rank as GET /v1/engines shows it: the frontend's handshake view
// merged with the dispatcher's load view.
type EngineView struct {
	Rank         int        `json:"rank"`
	Identity     string     `json:"identity"` // the 2-byte ZeroMQ identity, hex ("0100" = rank 1)
	State        string     `json:"state"`    // connecting, ready, dead, stuck, stalled, draining, group_broken
	Ready        bool       `json:"ready"`    // routable now
	Since        *time.Time `json:"since,omitempty"`
	Generation   int        `json:"generation"` // bumped on every rejoin
	InFlight     int64      `json:"in_flight"`
	Waiting      int64      `json:"waiting"`
	Running      int64      `json:"running"`
	KVCacheUsage float64    `json:"kv_cache_usage"`
	LastOutput   *time.Time `json:"last_output_time"` // null before the first output
	Cause        string     `json:"cause,omitempty"`  // why it is dead, stuck or group_broken
	// Draining: POST /v1/engines/{rank}/drain was called; no new requests
	// reach it and InFlight is the count left to finish there.
	Draining    bool   `json:"draining,omitempty"`
	MaxModelLen *int64 `json:"max_model_len,omitempty"`
	VLLMVersion string `json:"vllm_version,omitempty"`
	// Layout is the vLLM wire layout the engine was placed on, LayoutHow how it
	// was told (registration, vllm_version, UTILITY probes, forced).
	Layout    string `json:"vllm_layout,omitempty"`
	LayoutHow string `json:"vllm_layout_how,omitempty"`
	// Role is "prefill" or "decode" with P/D disaggregation, empty without.
	Role string `json:"role,omitempty"`
	// KVEvents is the rank's KV-event subscription under --lb-policy kv, null
	// when it has no event source.
	KVEvents *kvroute.Status `json:"kv_events"`
}

// MergeEngines joins both views by rank; a rank known to only one side still shows.
func MergeEngines(fe []frontend.EngineInfo, ds []dispatcher.EngineStatus) []EngineView {
	byRank := make(map[int]*EngineView, len(fe))
	var out []*EngineView
	get := func(rank int) *EngineView {
		if v := byRank[rank]; v != nil {
			return v
		}
		v := &EngineView{Rank: rank, Identity: hex.EncodeToString([]byte{byte(rank), byte(rank >> 8)}), State: "connecting"}
		byRank[rank] = v
		out = append(out, v)
		return v
	}
	for _, e := range fe {
		v := get(e.Rank)
		v.Identity = hex.EncodeToString(e.Identity[:])
		v.State = e.State.String()
		v.Ready = e.State == frontend.Ready
		v.Generation = e.Generation
		v.Cause = e.Cause
		if !e.Since.IsZero() {
			t := e.Since.UTC()
			v.Since = &t
		}
		if !e.LastOutput.IsZero() {
			t := e.LastOutput.UTC()
			v.LastOutput = &t
		}
		if e.Ready.MaxModelLen.Valid {
			n := e.Ready.MaxModelLen.Value
			v.MaxModelLen = &n
		}
		// The frontend's copy is cut short (an engine chooses its length); the
		// registration's raw one is only there before placement.
		if v.VLLMVersion = e.VLLMVersion; v.VLLMVersion == "" && e.Ready.VLLMVersion.Valid {
			v.VLLMVersion = e.Ready.VLLMVersion.Value
			if len(v.VLLMVersion) > 64 {
				v.VLLMVersion = strings.ToValidUTF8(v.VLLMVersion[:64], "") + "..."
			}
		}
		if e.Layout != nil {
			v.Layout, v.LayoutHow = e.Layout.String(), e.LayoutHow
		}
	}
	for _, st := range ds {
		_, seen := byRank[st.Rank]
		v := get(st.Rank)
		if !seen { // only the dispatcher knows it (no frontend, as in tests)
			v.Ready = st.State == dispatcher.EngineStateUp
			alive := v.Ready || st.State == dispatcher.EngineStateDraining || st.State == dispatcher.EngineStateGroupBroken
			v.State = map[bool]string{true: "ready", false: "dead"}[alive]
		}
		v.InFlight, v.Waiting, v.Running, v.KVCacheUsage = st.InFlight, st.Waiting, st.Running, st.KVCacheUsage
		v.Draining = st.Draining
		if v.LastOutput == nil && !st.LastOutput.IsZero() {
			t := st.LastOutput.UTC()
			v.LastOutput = &t
		}
		if st.State != dispatcher.EngineStateUp {
			// The dispatcher stops routing to a rank first; do not call it ready.
			v.Ready = false
			switch {
			case st.State == dispatcher.EngineStateStalled:
				v.State = "stalled"
			case st.State == dispatcher.EngineStateDraining && v.State == "ready":
				// Connected and finishing its requests: its load stays shown.
				v.State = string(dispatcher.EngineStateDraining)
				continue
			case st.State == dispatcher.EngineStateGroupBroken && v.State == "ready":
				v.State = string(dispatcher.EngineStateGroupBroken)
				v.Cause = st.Cause
			case v.State == "ready":
				v.State = "dead"
			}
			if v.Cause == "" {
				v.Cause = st.Cause
			}
		}
		if !v.Ready {
			// The load figures are the last a live engine reported; a dead or
			// stuck engine runs nothing and holds no cache for us.
			v.Waiting, v.Running, v.KVCacheUsage = 0, 0, 0
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	views := make([]EngineView, len(out))
	for i, v := range out {
		views[i] = *v
	}
	return views
}
