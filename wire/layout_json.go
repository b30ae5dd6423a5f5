package wire

import (
	"encoding/hex"
	"encoding/json"
)

// JSON writes l as a layout file (the format ParseLayout reads and
// `switchyard vllm-layout-script` writes), so a built-in layout can be exported,
// edited and loaded back with --vllm-layout.
func (l *Layout) JSON() ([]byte, error) {
	reasons := []string{"STOP", "LENGTH", "ABORT", "ERROR", "REPETITION"}
	f := map[string]any{
		"format":      1,
		"name":        l.Name,
		"description": l.Description,
		"ready":       map[string]any{"required": nonNil(l.ReadyRequired), "absent": nonNil(l.ReadyAbsent)},
		"probe":       map[string]any{"has": nonNil(l.ProbeHas), "lacks": nonNil(l.ProbeLacks)},
		// Reasons past the known five (a release's newer ones) are not kept by
		// ParseLayout; their count is.
		"finish_reasons":  reasons[:min(l.FinishReasons, len(reasons))],
		"sampling_params": nonNil(l.SamplingKeys),
		"native":          l.Native,
	}
	if l.VLLMVersion != "" {
		f["vllm_version"] = l.VLLMVersion
	}
	if !l.Versions.IsZero() {
		f["versions"] = l.Versions.String()
	}
	if l.RegistrationEmpty {
		f["registration"] = nil
	} else {
		f["registration"] = nonNil(l.Registration)
	}
	structs := map[string]any{
		"EngineCoreRequest": map[string]any{"fields": fieldsJSON(l.Request), "required": l.RequestRequired},
		"EngineCoreOutput":  map[string]any{"fields": fieldsJSON(l.Output)},
		"LogprobsLists":     map[string]any{"fields": []string{"logprob_token_ids", "logprobs", "sampled_token_ranks", "cu_num_generated_tokens"}[:l.logprobsLists]},
		"PrefillStats": map[string]any{"fields": []string{"num_prompt_tokens", "num_computed_tokens", "num_cached_tokens",
			"num_local_cached_tokens", "num_external_cached_tokens", "num_cache_creation_tokens"}[:l.prefillKeys]},
	}
	if l.LoRA != nil {
		structs["LoRARequest"] = map[string]any{"fields": fieldsJSON(l.LoRA)}
	}
	if l.Pooling != nil {
		structs["PoolingParams"] = map[string]any{"fields": fieldsJSON(l.Pooling)}
	}
	f["structs"] = structs
	return json.MarshalIndent(f, "", " ")
}

func fieldsJSON(fs []Field) []map[string]string {
	out := make([]map[string]string, len(fs))
	for i, fl := range fs {
		m := map[string]string{"name": fl.Name}
		if fl.Type != "" {
			m["type"] = fl.Type
		}
		if fl.Default != nil {
			m["default"] = hex.EncodeToString(fl.Default)
		}
		out[i] = m
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
