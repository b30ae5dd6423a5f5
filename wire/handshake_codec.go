package wire

// Handshake codecs: HELLO/READY (engine -> frontend on the handshake socket), INIT
// (frontend -> engine) and the input-socket registration. All are maps (msgspec
// encodes plain dicts and dataclasses as maps); decoders ignore or keep unknown keys.

import "slices"

// AppendHandshakeStatus appends a HELLO or READY map: status, local, headless, then
// each optional key that is set.
func AppendHandshakeStatus(dst []byte, h *HandshakeStatus) []byte {
	n := 3
	for _, v := range [...]bool{h.ParallelConfigHash.Valid, h.CoordStorePort.Valid, h.NumRedundantExperts.Valid, h.NumGPUBlocks.Valid, h.DPStatsAddress.Valid} {
		if v {
			n++
		}
	}
	b := appendMapHeader(dst, n)
	b = appendStr(b, "status")
	b = appendStr(b, h.Status)
	b = appendStr(b, "local")
	b = appendBool(b, h.Local)
	b = appendStr(b, "headless")
	b = appendBool(b, h.Headless)
	if h.ParallelConfigHash.Valid {
		b = appendStr(b, "parallel_config_hash")
		b = appendStr(b, h.ParallelConfigHash.Value)
	}
	if h.CoordStorePort.Valid {
		b = appendStr(b, "coord_store_port")
		b = appendInt(b, h.CoordStorePort.Value)
	}
	if h.NumRedundantExperts.Valid {
		b = appendStr(b, "num_redundant_experts")
		b = appendInt(b, h.NumRedundantExperts.Value)
	}
	if h.NumGPUBlocks.Valid {
		b = appendStr(b, "num_gpu_blocks")
		b = appendInt(b, h.NumGPUBlocks.Value)
	}
	if h.DPStatsAddress.Valid {
		b = appendStr(b, "dp_stats_address")
		b = appendStr(b, h.DPStatsAddress.Value)
	}
	return b
}

// DecodeHandshakeStatus decodes HELLO or READY. status is required; unknown keys
// are ignored; nil optional values stay unset.
func DecodeHandshakeStatus(body []byte) (HandshakeStatus, error) {
	const typ = "HandshakeStatus"
	var h HandshakeStatus
	r := reader{b: body}
	n, err := r.mapHeader()
	if err != nil {
		return h, fieldErr(err, typ, "")
	}
	hasStatus := false
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return h, fieldErr(err, typ, "")
		}
		h.Keys = append(h.Keys, string(k))
		switch string(k) {
		case "status":
			h.Status, err = r.str()
			hasStatus = err == nil
		case "local":
			h.Local, err = r.bool()
		case "headless":
			h.Headless, err = r.bool()
		case "parallel_config_hash":
			h.ParallelConfigHash, err = r.optStr()
		case "coord_store_port":
			h.CoordStorePort, err = r.optInt()
		case "num_redundant_experts":
			h.NumRedundantExperts, err = r.optInt()
		case "num_gpu_blocks":
			h.NumGPUBlocks, err = r.optInt()
		case "dp_stats_address":
			h.DPStatsAddress, err = r.optStr()
		default:
			err = r.skip()
		}
		if err != nil {
			return h, fieldErr(err, typ, string(k))
		}
	}
	if !hasStatus {
		return h, &DecodeError{Type: typ, Field: "status", Msg: "missing"}
	}
	if !r.done() {
		return h, &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes"}
	}
	return h, nil
}

// AppendReady appends READY as an engine of layout l builds it: status, local,
// headless, then every key l's READY requires (nil when h has no value; v0.11 to
// v0.18 send num_gpu_blocks and dp_stats_address, null or not), then the optional
// keys that are set and l's READY may carry.
func AppendReady(dst []byte, l *Layout, h *HandshakeStatus) []byte {
	type kv struct {
		key   string
		valid bool
		write func([]byte) []byte
	}
	all := [...]kv{
		{"num_gpu_blocks", h.NumGPUBlocks.Valid, func(b []byte) []byte { return appendOptInt(b, h.NumGPUBlocks) }},
		{"dp_stats_address", h.DPStatsAddress.Valid, func(b []byte) []byte { return appendOptStr(b, h.DPStatsAddress) }},
		{"parallel_config_hash", h.ParallelConfigHash.Valid, func(b []byte) []byte { return appendOptStr(b, h.ParallelConfigHash) }},
		{"coord_store_port", h.CoordStorePort.Valid, func(b []byte) []byte { return appendOptInt(b, h.CoordStorePort) }},
		{"num_redundant_experts", h.NumRedundantExperts.Valid, func(b []byte) []byte { return appendOptInt(b, h.NumRedundantExperts) }},
	}
	var keep [len(all)]bool
	n := 3
	for i, e := range all {
		keep[i] = slices.Contains(l.ReadyRequired, e.key) || e.valid && !slices.Contains(l.ReadyAbsent, e.key)
		if keep[i] {
			n++
		}
	}
	b := appendMapHeader(dst, n)
	b = appendStr(b, "status")
	b = appendStr(b, "READY")
	b = appendStr(b, "local")
	b = appendBool(b, h.Local)
	b = appendStr(b, "headless")
	b = appendBool(b, h.Headless)
	for i, e := range all {
		if keep[i] {
			b = appendStr(b, e.key)
			b = e.write(b)
		}
	}
	return b
}

// AppendInit appends EngineHandshakeMetadata: every addresses field (nil when
// unset) and parallel_config ({} when empty).
func AppendInit(dst []byte, in *HandshakeInit) []byte {
	b := append(dst, 0x82)
	b = appendStr(b, "addresses")
	b = append(b, 0x85)
	a := &in.Addresses
	b = appendStr(b, "inputs")
	b = appendStrs(b, a.Inputs)
	b = appendStr(b, "outputs")
	b = appendStrs(b, a.Outputs)
	b = appendStr(b, "coordinator_input")
	b = appendOptStr(b, a.CoordinatorInput)
	b = appendStr(b, "coordinator_output")
	b = appendOptStr(b, a.CoordinatorOutput)
	b = appendStr(b, "frontend_stats_publish_address")
	b = appendOptStr(b, a.FrontendStatsPublishAddress)
	b = appendStr(b, "parallel_config")
	b = appendMapHeader(b, len(in.ParallelConfig))
	for _, f := range in.ParallelConfig {
		b = appendStr(b, f.Key)
		b = appendRaw(b, f.Value)
	}
	return b
}

// DecodeInit decodes INIT as the engine does: addresses (with inputs and outputs)
// and parallel_config are required, unknown keys are ignored.
func DecodeInit(body []byte) (HandshakeInit, error) {
	const typ = "HandshakeInit"
	var in HandshakeInit
	r := reader{b: body}
	n, err := r.mapHeader()
	if err != nil {
		return in, fieldErr(err, typ, "")
	}
	var hasAddr, hasPC bool
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return in, fieldErr(err, typ, "")
		}
		switch string(k) {
		case "addresses":
			err = r.addresses(&in.Addresses)
			hasAddr = err == nil
		case "parallel_config":
			in.ParallelConfig, err = r.rawFields()
			hasPC = err == nil
		default:
			err = r.skip()
		}
		if err != nil {
			return in, fieldErr(err, typ, string(k))
		}
	}
	switch {
	case !hasAddr:
		return in, &DecodeError{Type: typ, Field: "addresses", Msg: "missing"}
	case !hasPC:
		return in, &DecodeError{Type: typ, Field: "parallel_config", Msg: "missing"}
	case !r.done():
		return in, &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes"}
	}
	return in, nil
}

func (r *reader) addresses(a *EngineZmqAddresses) error {
	const typ = "EngineZmqAddresses"
	n, err := r.mapHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return fieldErr(err, typ, "")
		}
		switch string(k) {
		case "inputs":
			a.Inputs, err = r.optStrs()
			if err == nil && a.Inputs == nil {
				err = &DecodeError{Offset: r.off, Msg: "expected array, got nil"}
			}
		case "outputs":
			a.Outputs, err = r.optStrs()
			if err == nil && a.Outputs == nil {
				err = &DecodeError{Offset: r.off, Msg: "expected array, got nil"}
			}
		case "coordinator_input":
			a.CoordinatorInput, err = r.optStr()
		case "coordinator_output":
			a.CoordinatorOutput, err = r.optStr()
		case "frontend_stats_publish_address":
			a.FrontendStatsPublishAddress, err = r.optStr()
		default:
			err = r.skip()
		}
		if err != nil {
			return fieldErr(err, typ, string(k))
		}
	}
	if a.Inputs == nil {
		return &DecodeError{Type: typ, Field: "inputs", Offset: r.off, Msg: "missing"}
	}
	if a.Outputs == nil {
		return &DecodeError{Type: typ, Field: "outputs", Offset: r.off, Msg: "missing"}
	}
	return nil
}

// rawFields reads a {str: any} map keeping the values undecoded, in order. An empty
// map gives a non-nil empty slice.
func (r *reader) rawFields() ([]RawField, error) {
	n, err := r.mapHeader()
	if err != nil {
		return nil, err
	}
	fs := make([]RawField, 0, r.capFor(n, 2))
	for range n {
		var f RawField
		if f.Key, err = r.str(); err != nil {
			return nil, err
		}
		if f.Value, err = r.raw(); err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}
