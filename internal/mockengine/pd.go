package mockengine

// Prefill/decode roles of the mock engine, the proof of switchyard's P/D pairing.
// A prefill mock answers an ADD whose kv_transfer_params say do_remote_decode with
// a final output carrying kv_transfer_params that hold a handle for exactly the
// prompt it prefilled (and the transfer_id it was given); a decode mock refuses a
// do_remote_prefill ADD whose handle does not match its own prompt (it finishes
// with finish_reason error and no token, as a KV pull that found nothing fails),
// and counts the requests it prefilled itself. The handle is a hash, so the check
// works across processes with no shared state.

import (
	"fmt"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// Roles of Config.Role.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// PDStats are a role's counters, as the "pd_stats" utility call returns them.
type PDStats struct {
	Prefills       int `msgpack:"prefills"`        // prefill role: do_remote_decode requests prefilled
	RemotePrefills int `msgpack:"remote_prefills"` // decode role: requests whose KV came from a prefill (handle matched)
	LocalPrefills  int `msgpack:"local_prefills"`  // decode role: plain requests it prefilled itself
	Refused        int `msgpack:"refused"`         // decode role: do_remote_prefill requests with a wrong or missing handle
}

// pdRole is the Scheduler's P/D state; nil for an engine without a role.
type pdRole struct {
	role     string
	engineID string
	stats    PDStats
	params   map[string]wire.Raw // prefill: request id -> kv_transfer_params of its final output
	refuse   map[string]bool     // decode: requests finished with an error at their first step
}

// SetRole gives the scheduler a P/D role ("" = none); engineID names it in the
// kv_transfer_params a prefill returns.
func (s *Scheduler) SetRole(role, engineID string) error {
	switch role {
	case "":
		s.pd = nil
	case RolePrefill, RoleDecode:
		s.pd = &pdRole{role: role, engineID: engineID, params: map[string]wire.Raw{}, refuse: map[string]bool{}}
	default:
		return fmt.Errorf("mockengine: unknown role %q (want %q or %q)", role, RolePrefill, RoleDecode)
	}
	return nil
}

// PDStats returns the role's counters.
func (s *Scheduler) PDStats() PDStats {
	if s.pd == nil {
		return PDStats{}
	}
	return s.pd.stats
}

// PDHandle is the handle a prefill mock gives the prompt it prefilled under
// transferID; a decode mock recomputes it from its own prompt.
func PDHandle(prompt []int64, transferID string) string {
	h := seqSeed ^ 0x5044 // "PD"
	for _, t := range prompt {
		h = seqHash(h, t)
	}
	for i := 0; i < len(transferID); i++ {
		h = seqHash(h, int64(transferID[i]))
	}
	return strconv.FormatUint(h, 16)
}

// kvTransferParams decodes extra_args["kv_transfer_params"] (nil when absent).
func kvTransferParams(r *wire.EngineCoreRequest) map[string]any {
	if r.Sampling == nil {
		return nil
	}
	raw, ok := wire.KVParam(r.Sampling.ExtraArgs, wire.KVTransferParamsKey)
	if !ok {
		return nil
	}
	var kv map[string]any
	if msgpack.Unmarshal(raw, &kv) != nil {
		return nil
	}
	return kv
}

// onAdd applies the role to a new request.
func (p *pdRole) onAdd(r *wire.EngineCoreRequest) {
	kv := kvTransferParams(r)
	switch p.role {
	case RolePrefill:
		if kv["do_remote_decode"] != true {
			return
		}
		tid, _ := kv["transfer_id"].(string)
		if tid == "" {
			tid = r.RequestID
		}
		out, err := msgpack.Marshal(map[string]any{
			"do_remote_prefill": true, "do_remote_decode": false,
			"remote_engine_id": p.engineID, "remote_block_ids": []int{len(r.PromptTokenIDs) / mockBlockSize},
			"remote_host": "127.0.0.1", "remote_port": 0, "transfer_id": tid,
			"mock_handle": PDHandle(r.PromptTokenIDs, tid),
		})
		if err == nil {
			p.params[r.RequestID] = out
		}
	case RoleDecode:
		if kv["do_remote_prefill"] != true {
			p.stats.LocalPrefills++
			return
		}
		tid, _ := kv["transfer_id"].(string)
		if h, _ := kv["mock_handle"].(string); h == "" || h != PDHandle(r.PromptTokenIDs, tid) {
			p.stats.Refused++
			p.refuse[r.RequestID] = true
			return
		}
		p.stats.RemotePrefills++
	}
}

// refused reports (once) whether a decode mock refuses request id.
func (p *pdRole) refused(id string) bool {
	if !p.refuse[id] {
		return false
	}
	delete(p.refuse, id)
	return true
}

// onFinish attaches a prefill's kv_transfer_params to its final output.
func (p *pdRole) onFinish(id string, o *wire.EngineCoreOutput) {
	params, ok := p.params[id]
	if !ok {
		return
	}
	delete(p.params, id)
	if o.FinishReason == wire.FinishLength {
		// vLLM's connectors hand params over only for a request capped by length.
		o.KVTransferParams = params
		p.stats.Prefills++
	}
}

// forget drops an aborted request's state.
func (p *pdRole) forget(id string) {
	delete(p.params, id)
	delete(p.refuse, id)
}
