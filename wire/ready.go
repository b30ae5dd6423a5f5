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
	b = appendStr(b, "max_model_len")
	b = appendOptInt(b, r.MaxModelLen)
	b = appendStr(b, "num_gpu_blocks")
	b = appendOptInt(b, r.NumGPUBlocks)
	b = appendStr(b, "dp_stats_address")
	b = appendOptStr(b, r.DPStatsAddress)
	b = appendStr(b, "block_size")
	b = appendOptInt(b, r.BlockSize)
	b = appendStr(b, "mamba_block_size")
	b = appendOptInt(b, r.MambaBlockSize)
	b = appendStr(b, "dtype")
	b = appendOptStr(b, r.DType)
	b = appendStr(b, "vllm_version")
	b = appendOptStr(b, r.VLLMVersion)
	b = appendStr(b, "world_size")
	b = appendOptInt(b, r.WorldSize)
	b = appendStr(b, "data_parallel_size")
	b = appendOptInt(b, r.DataParallelSize)
	b = appendStr(b, "kv_cache_size_tokens")
	b = appendOptInt(b, r.KVCacheSizeTokens)
	b = appendStr(b, "kv_cache_max_concurrency")
	b = appendRaw(b, r.KVCacheMaxConcurrency)
	b = appendStr(b, "tensor_parallel_size")
	b = appendOptInt(b, r.TensorParallelSize)
	b = appendStr(b, "pipeline_parallel_size")
	b = appendOptInt(b, r.PipelineParallelSize)
	b = appendStr(b, "decode_context_parallel_size")
	b = appendOptInt(b, r.DecodeContextParallelSize)
	b = appendStr(b, "data_parallel_rank")
	b = appendOptInt(b, r.DataParallelRank)
	b = appendStr(b, "max_num_seqs")
	b = appendOptInt(b, r.MaxNumSeqs)
	b = appendStr(b, "max_num_batched_tokens")
	b = appendOptInt(b, r.MaxNumBatchedTokens)
	b = appendStr(b, "instance_id")
	b = appendOptStr(b, r.InstanceID)
	b = appendStr(b, "supports_lora")
	b = appendOptBool(b, r.SupportsLoRA)
	b = appendStr(b, "max_loras")
	b = appendOptInt(b, r.MaxLoRAs)
	b = appendStr(b, "coord_store_port")
	b = appendOptInt(b, r.CoordStorePort)
	b = appendStr(b, "coordinator_input_address")
	b = appendOptStr(b, r.CoordinatorInputAddress)
	b = appendStr(b, "coordinator_output_address")
	b = appendOptStr(b, r.CoordinatorOutputAddress)
	b = appendStr(b, "kv_events_config")
	b = appendRaw(b, r.KVEventsConfig)
	b = appendStr(b, "weight_transfer_backend")
	b = appendOptStr(b, r.WeightTransferBackend)
	b = appendStr(b, "enable_sleep_mode")
	b = appendOptBool(b, r.EnableSleepMode)
	b = appendStr(b, "supports_draft_weight_updates")
	b = appendOptBool(b, r.SupportsDraftWeightUpdates)
	for _, f := range r.Unknown {
		b = appendStr(b, f.Key)
		b = appendRaw(b, f.Value)
	}
	return b
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
