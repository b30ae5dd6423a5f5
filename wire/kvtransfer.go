package wire

import "errors"

// KVTransferParamsKey is the SamplingParams.extra_args key vLLM's engine reads a
// request's KV-transfer parameters from (vllm/v1/request.py: the Request takes
// sampling_params.extra_args["kv_transfer_params"]; the OpenAI serving layer puts a
// client's kv_transfer_params there). Every KV connector (NIXL, Mooncake, P2P, ...)
// reads its flags from that one dict.
const KVTransferParamsKey = "kv_transfer_params"

// AppendExtraArgsWith appends to dst the msgpack map extra (nil = an empty map)
// with its KVTransferParamsKey entry set to params (one msgpack value, copied as
// is): the extra_args of a P/D leg. Other entries are kept in their order; an
// existing kv_transfer_params entry is replaced. It fails when extra is not a map.
func AppendExtraArgsWith(dst []byte, extra Raw, params Raw) ([]byte, error) {
	if len(params) == 0 {
		return nil, errors.New("wire: empty kv_transfer_params")
	}
	if len(extra) == 0 || (len(extra) == 1 && extra[0] == 0xc0) {
		dst = appendMapHeader(dst, 1)
		dst = appendStr(dst, KVTransferParamsKey)
		return append(dst, params...), nil
	}
	r := reader{b: extra}
	n, err := r.mapHeader()
	if err != nil {
		return nil, err
	}
	// Find the entries to keep first: the header's count depends on them.
	type span struct{ from, to int }
	var stack [8]span
	keep := stack[:0]
	for range n {
		from := r.off
		k, err := r.strBytes()
		if err != nil {
			return nil, err
		}
		if err := r.skip(); err != nil {
			return nil, err
		}
		if string(k) == KVTransferParamsKey {
			continue
		}
		keep = append(keep, span{from, r.off})
	}
	dst = appendMapHeader(dst, len(keep)+1)
	for _, s := range keep {
		dst = append(dst, extra[s.from:s.to]...)
	}
	dst = appendStr(dst, KVTransferParamsKey)
	return append(dst, params...), nil
}

// KVParam reports the value of key in params (a msgpack map, as an engine's
// EngineCoreOutput.kv_transfer_params carries it) undecoded, and whether it is
// there. Connector-agnostic code looks at a flag or two and carries the rest.
func KVParam(params Raw, key string) (Raw, bool) {
	if len(params) == 0 {
		return nil, false
	}
	r := reader{b: params}
	n, err := r.mapHeader()
	if err != nil {
		return nil, false
	}
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return nil, false
		}
		from := r.off
		if err := r.skip(); err != nil {
			return nil, false
		}
		if string(k) == key {
			return params[from:r.off:r.off], true
		}
	}
	return nil, false
}

// AppendPrefillKVParams appends the kv_transfer_params switchyard gives a prefill
// leg, the dict vLLM's disaggregation proxies send (toy_proxy_server.py for NIXL,
// mooncake_connector_proxy.py): do_remote_decode true, do_remote_prefill false, the
// remote_* fields nil (the prefill's connector fills them in its final output), plus
// transfer_id, the id both legs' connectors pair on (Mooncake reads it on both
// sides; NIXL ignores it).
func AppendPrefillKVParams(dst []byte, transferID string) []byte {
	dst = appendMapHeader(dst, 7)
	dst = appendStr(dst, "do_remote_decode")
	dst = appendBool(dst, true)
	dst = appendStr(dst, "do_remote_prefill")
	dst = appendBool(dst, false)
	for _, k := range [...]string{"remote_engine_id", "remote_block_ids", "remote_host", "remote_port"} {
		dst = appendStr(dst, k)
		dst = appendNil(dst)
	}
	dst = appendStr(dst, "transfer_id")
	return appendStr(dst, transferID)
}
