package wire

// The input-socket registration (EngineCoreReadyResponse), the first frame an engine
// sends on each input socket. The dataclass is written as a map with every field (nil
// when unset), in the order vLLM declares them; older engines send an empty frame.

// readyKeys is the number of keys AppendReadyResponse always writes.
const readyKeys = 27

// AppendReadyResponse appends the registration map: every known key, then Unknown.
// An Empty response appends nothing (the empty frame of engines before c8d98f81).
func AppendReadyResponse(dst []byte, r *ReadyResponse) []byte {
	if r.Empty {
		return dst
	}
	b := appendMapHeader(dst, readyKeys+len(r.Unknown))
	for _, k := range readyKeyNames {
		b = appendStr(b, k)
		b = appendReadyValue(b, r, k)
	}
	for _, f := range r.Unknown {
		b = appendStr(b, f.Key)
		b = appendRaw(b, f.Value)
	}
	return b
}

// AppendRegistration appends the registration an engine of layout l sends: nothing
// for layouts with an empty frame, else exactly l's keys in l's order (values from r;
// a key r does not have is nil), as that release's dataclass writes them.
func AppendRegistration(dst []byte, l *Layout, r *ReadyResponse) []byte {
	if l.RegistrationEmpty {
		return dst
	}
	b := appendMapHeader(dst, len(l.Registration))
	for _, k := range l.Registration {
		b = appendStr(b, k)
		b = appendReadyValue(b, r, k)
	}
	return b
}

var readyKeyNames = [readyKeys]string{
	"max_model_len", "num_gpu_blocks", "dp_stats_address", "block_size", "mamba_block_size",
	"dtype", "vllm_version", "world_size", "data_parallel_size", "kv_cache_size_tokens",
	"kv_cache_max_concurrency", "tensor_parallel_size", "pipeline_parallel_size",
	"decode_context_parallel_size", "data_parallel_rank", "max_num_seqs",
	"max_num_batched_tokens", "instance_id", "supports_lora", "max_loras", "coord_store_port",
	"coordinator_input_address", "coordinator_output_address", "kv_events_config",
	"weight_transfer_backend", "enable_sleep_mode", "supports_draft_weight_updates",
}

// appendReadyValue writes r's value for registration key k (nil when r has none).
func appendReadyValue(b []byte, r *ReadyResponse, k string) []byte {
	switch k {
	case "max_model_len":
		return appendOptInt(b, r.MaxModelLen)
	case "num_gpu_blocks":
		return appendOptInt(b, r.NumGPUBlocks)
	case "dp_stats_address":
		return appendOptStr(b, r.DPStatsAddress)
	case "block_size":
		return appendOptInt(b, r.BlockSize)
	case "mamba_block_size":
		return appendOptInt(b, r.MambaBlockSize)
	case "dtype":
		return appendOptStr(b, r.DType)
	case "vllm_version":
		return appendOptStr(b, r.VLLMVersion)
	case "world_size":
		return appendOptInt(b, r.WorldSize)
	case "data_parallel_size":
		return appendOptInt(b, r.DataParallelSize)
	case "kv_cache_size_tokens":
		return appendOptInt(b, r.KVCacheSizeTokens)
	case "kv_cache_max_concurrency":
		return appendRaw(b, r.KVCacheMaxConcurrency)
	case "tensor_parallel_size":
		return appendOptInt(b, r.TensorParallelSize)
	case "pipeline_parallel_size":
		return appendOptInt(b, r.PipelineParallelSize)
	case "decode_context_parallel_size":
		return appendOptInt(b, r.DecodeContextParallelSize)
	case "data_parallel_rank":
		return appendOptInt(b, r.DataParallelRank)
	case "max_num_seqs":
		return appendOptInt(b, r.MaxNumSeqs)
	case "max_num_batched_tokens":
		return appendOptInt(b, r.MaxNumBatchedTokens)
	case "instance_id":
		return appendOptStr(b, r.InstanceID)
	case "supports_lora":
		return appendOptBool(b, r.SupportsLoRA)
	case "max_loras":
		return appendOptInt(b, r.MaxLoRAs)
	case "coord_store_port":
		return appendOptInt(b, r.CoordStorePort)
	case "coordinator_input_address":
		return appendOptStr(b, r.CoordinatorInputAddress)
	case "coordinator_output_address":
		return appendOptStr(b, r.CoordinatorOutputAddress)
	case "kv_events_config":
		return appendRaw(b, r.KVEventsConfig)
	case "weight_transfer_backend":
		return appendOptStr(b, r.WeightTransferBackend)
	case "enable_sleep_mode":
		return appendOptBool(b, r.EnableSleepMode)
	case "supports_draft_weight_updates":
		return appendOptBool(b, r.SupportsDraftWeightUpdates)
	}
	for _, f := range r.Unknown {
		if f.Key == k {
			return appendRaw(b, f.Value)
		}
	}
	return appendNil(b)
}

// DecodeReadyResponse decodes a registration frame. An empty frame gives Empty=true;
// every key is optional and unknown keys are kept in Unknown.
func DecodeReadyResponse(body []byte) (ReadyResponse, error) {
	const typ = "ReadyResponse"
	var r ReadyResponse
	if len(body) == 0 {
		r.Empty = true
		return r, nil
	}
	rd := reader{b: body}
	n, err := rd.mapHeader()
	if err != nil {
		return r, fieldErr(err, typ, "")
	}
	for range n {
		k, err := rd.strBytes()
		if err != nil {
			return r, fieldErr(err, typ, "")
		}
		r.Keys = append(r.Keys, string(k))
		switch string(k) {
		case "max_model_len":
			r.MaxModelLen, err = rd.optInt()
		case "num_gpu_blocks":
			r.NumGPUBlocks, err = rd.optInt()
		case "dp_stats_address":
			r.DPStatsAddress, err = rd.optStr()
		case "block_size":
			r.BlockSize, err = rd.optInt()
		case "mamba_block_size":
			r.MambaBlockSize, err = rd.optInt()
		case "dtype":
			r.DType, err = rd.optStr()
		case "vllm_version":
			r.VLLMVersion, err = rd.optStr()
		case "world_size":
			r.WorldSize, err = rd.optInt()
		case "data_parallel_size":
			r.DataParallelSize, err = rd.optInt()
		case "kv_cache_size_tokens":
			r.KVCacheSizeTokens, err = rd.optInt()
		case "kv_cache_max_concurrency":
			r.KVCacheMaxConcurrency, err = rd.raw()
		case "tensor_parallel_size":
			r.TensorParallelSize, err = rd.optInt()
		case "pipeline_parallel_size":
			r.PipelineParallelSize, err = rd.optInt()
		case "decode_context_parallel_size":
			r.DecodeContextParallelSize, err = rd.optInt()
		case "data_parallel_rank":
			r.DataParallelRank, err = rd.optInt()
		case "max_num_seqs":
			r.MaxNumSeqs, err = rd.optInt()
		case "max_num_batched_tokens":
			r.MaxNumBatchedTokens, err = rd.optInt()
		case "instance_id":
			r.InstanceID, err = rd.optStr()
		case "supports_lora":
			r.SupportsLoRA, err = rd.optBool()
		case "max_loras":
			r.MaxLoRAs, err = rd.optInt()
		case "coord_store_port":
			r.CoordStorePort, err = rd.optInt()
		case "coordinator_input_address":
			r.CoordinatorInputAddress, err = rd.optStr()
		case "coordinator_output_address":
			r.CoordinatorOutputAddress, err = rd.optStr()
		case "kv_events_config":
			r.KVEventsConfig, err = rd.rawOf(kindMap)
		case "weight_transfer_backend":
			r.WeightTransferBackend, err = rd.optStr()
		case "enable_sleep_mode":
			r.EnableSleepMode, err = rd.optBool()
		case "supports_draft_weight_updates":
			r.SupportsDraftWeightUpdates, err = rd.optBool()
		default:
			var v Raw
			if v, err = rd.raw(); err == nil {
				r.Unknown = append(r.Unknown, RawField{Key: string(k), Value: v})
			}
		}
		if err != nil {
			return r, fieldErr(err, typ, string(k))
		}
	}
	if !rd.done() {
		return r, &DecodeError{Type: typ, Offset: rd.off, Msg: "trailing bytes"}
	}
	return r, nil
}
