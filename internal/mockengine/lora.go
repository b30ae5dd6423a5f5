package mockengine

// LoRA as a vLLM engine started with --enable-lora --max-loras N answers it:
// the add_lora, remove_lora, list_loras and pin_lora utilities, supports_lora and
// max_loras in READY, the adapters of the running and waiting requests in the
// scheduler stats. A request with a LoRARequest is answered with other tokens
// than the same prompt without one (the adapter's name seeds the sequence), so
// a test can tell that the adapter reached the engine.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// loraMethods are the EngineCore LoRA methods; every release has them.
var loraMethods = []string{"add_lora", "remove_lora", "list_loras", "pin_lora"}

// loraDisabled is the failure of a LoRA call to an engine without LoRA.
const loraDisabled = "LoRA is not enabled. Use --enable-lora to enable LoRA."

// loraSeed makes a LoRA request's sequence its own: the name's bytes are hashed
// into the prompt's hash, so the answer depends on the adapter.
func loraSeed(h uint64, name string) uint64 {
	h = seqHash(h, -1)
	for i := 0; i < len(name); i++ {
		h = seqHash(h, int64(name[i]))
	}
	return h
}

// TokensForLoRA is TokensFor for a request carrying adapter name.
func TokensForLoRA(name string, prompt []int64, n int) []int64 {
	if name == "" {
		return TokensFor(prompt, n)
	}
	h := seqSeed
	for _, t := range prompt {
		h = seqHash(h, t)
	}
	h = loraSeed(h, name)
	out := make([]int64, n)
	for i := range out {
		out[i] = tokenOf(h)
		h = seqHash(h, out[i])
	}
	return out
}

// loraUtility answers one LoRA method; ok is false for other methods.
func (e *engine) loraUtility(method string, args wire.Raw) (result wire.Raw, failure string, ok bool) {
	if !slices.Contains(loraMethods, method) {
		return nil, "", false
	}
	if e.cfg.MaxLoRAs <= 0 {
		return nil, loraDisabled, true
	}
	if e.loras == nil {
		e.loras = map[int64]string{}
	}
	if method == "list_loras" {
		ids := make([]int64, 0, len(e.loras))
		for id := range e.loras {
			ids = append(ids, id)
		}
		slices.Sort(ids) // a Python set goes out as an array
		b, _ := msgpack.Marshal(ids)
		return b, "", true
	}
	if method == "add_lora" {
		lr, err := e.cfg.Layout.DecodeLoRAArgs(args)
		if err != nil {
			return nil, err.Error(), true
		}
		if lr.IntID < 1 {
			return nil, "id must be > 0, got " + strconv.FormatInt(lr.IntID, 10), true
		}
		if filepath.IsAbs(lr.Path) {
			// vLLM looks for the adapter at the path (or on the hub for a
			// relative name); an absolute path that names nothing is not found.
			if _, err := os.Stat(lr.Path); err != nil {
				return nil, "Loading lora " + lr.Name + " failed: No adapter found for " + lr.Path, true
			}
		}
		e.loras[lr.IntID] = lr.Name
		e.log.Info("mock engine: LoRA adapter added", "name", lr.Name, "lora_int_id", lr.IntID, "path", lr.Path)
		return rawTrue, "", true
	}
	var id []int64
	if err := msgpack.Unmarshal(args, &id); err != nil || len(id) != 1 {
		return nil, "want one lora_int_id argument", true
	}
	_, held := e.loras[id[0]]
	if method == "remove_lora" {
		delete(e.loras, id[0])
	}
	if held {
		return rawTrue, "", true
	}
	return rawFalse, "", true
}

// withLoRAStats adds running_lora_adapters and waiting_lora_adapters ({name:
// count}) to the step's scheduler stats, as vLLM's scheduler reports them.
func (s *Scheduler) withLoRAStats(st wire.SchedulerStats) wire.SchedulerStats {
	m := map[string]any{}
	if st.Raw != nil {
		if err := msgpack.Unmarshal(st.Raw, &m); err != nil {
			return st
		}
	} else {
		m["num_running_reqs"], m["num_waiting_reqs"] = st.NumRunningReqs, st.NumWaitingReqs
		m["step_counter"], m["current_wave"], m["kv_cache_usage"] = st.StepCounter, st.CurrentWave, st.KVCacheUsage
	}
	running, waiting := map[string]int{}, map[string]int{}
	for _, q := range s.running {
		if q.lora != "" {
			running[q.lora]++
		}
	}
	if s.kv != nil {
		for _, q := range s.kv.waiting {
			if q.lora != "" {
				waiting[q.lora]++
			}
		}
	}
	m["running_lora_adapters"], m["waiting_lora_adapters"] = running, waiting
	if b, err := msgpack.Marshal(m); err == nil {
		st.Raw = b
	}
	return st
}
