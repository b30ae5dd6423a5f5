package wire

import (
	"errors"
	"runtime"
	"testing"
)

func TestDecodeErrorNamesTypeAndField(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"token ids not an array", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 91 92 a5 72 65 71 2d 31 a1 78 c0"+ts)}, new(EngineCoreOutputs))
		}, "wire: EngineCoreOutput.new_token_ids: expected array, got str"},
		{"output missing new_token_ids", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 91 91 a5 72 65 71 2d 31 c0"+ts)}, new(EngineCoreOutputs))
		}, "wire: EngineCoreOutputs.outputs: expected at least 2 fields (request_id, new_token_ids), got 1"},
		{"huge array header in a small frame", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 dd ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00")}, new(EngineCoreOutputs))
		}, "wire: EngineCoreOutputs.outputs: array of 4294967295 elements exceeds the remaining data"},
		{"huge token list", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 91 92 a1 78 dd 7f ff ff ff 00 00")}, new(EngineCoreOutputs))
		}, "wire: EngineCoreOutput.new_token_ids: array of 2147483647 elements exceeds the remaining data"},
		{"huge map header", func() error {
			_, err := DecodeReadyResponse(unhex(t, "df ff ff ff ff a1 61 01"))
			return err
		}, "wire: ReadyResponse: map of 4294967295 entries exceeds the remaining data"},
		{"truncated string", func() error {
			_, err := DecodeAbort(unhex(t, "91 db 00 01 00 00 61"))
			return err
		}, "wire: Abort.request_ids: unexpected end of data"},
		{"ADD with 8 fields", func() error {
			return DecodeAdd([][]byte{unhex(t, "98 a1 78 91 01 c0 80 c0 cb 41 da 55 6e 40 10 00 00 c0 c0")}, new(EngineCoreRequest))
		}, "wire: EngineCoreRequest: expected at least 9 fields, got 8"},
		{"float for an int sampling field", func() error {
			return DecodeAdd([][]byte{unhex(t, "99 a1 78 91 01 c0 81 a5 74 6f 70 5f 6b cb 3f f0 00 00 00 00 00 00 c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0")}, new(EngineCoreRequest))
		}, "wire: SamplingParams.top_k: expected int, got float"},
		{"bool for an int prompt token", func() error {
			return DecodeAdd([][]byte{unhex(t, "99 a1 78 91 c3 c0 80 c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0")}, new(EngineCoreRequest))
		}, "wire: EngineCoreRequest.prompt_token_ids: expected int, got bool"},
		{"nil for a non-optional int", func() error {
			return DecodeAdd([][]byte{unhex(t, "9c a1 78 91 01 c0 80 c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0 c0 c0 c0")}, new(EngineCoreRequest))
		}, "wire: EngineCoreRequest.client_index: expected int, got nil"},
		{"both sampling and pooling nil", func() error {
			return DecodeAdd([][]byte{unhex(t, "99 a1 78 91 01 c0 c0 c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0")}, new(EngineCoreRequest))
		}, "wire: EngineCoreRequest.sampling_params: exactly one of sampling_params and pooling_params must be set"},
		{"aux index out of range", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 91 95 a1 78 90 c0 c0 93 a3 3c 66 34 91 01 05 c0"+ts)}, new(EngineCoreOutputs))
		}, "wire: Tensor.data: aux frame index 5 out of range (1 frames)"},
		{"int above int64", func() error {
			_, err := DecodeStartDPWave(unhex(t, "92 cf ff ff ff ff ff ff ff ff c0"))
			return err
		}, "wire: StartDPWave.wave: integer out of range"},
		{"type byte 0xc1", func() error {
			return DecodeOutputs([][]byte{unhex(t, "94 00 91 93 a1 78 90 c1 c0"+ts)}, new(EngineCoreOutputs))
		}, "wire: EngineCoreOutput.new_logprobs: expected array, got invalid"},
		{"trailing bytes", func() error {
			_, err := DecodeFirstReq(unhex(t, "92 01 03 00"))
			return err
		}, "wire: FirstReq: trailing bytes"},
		{"INIT without outputs", func() error {
			_, err := DecodeInit(unhex(t, "82 a9 61 64 64 72 65 73 73 65 73 81 a6 69 6e 70 75 74 73 90 af 70 61 72 61 6c 6c 65 6c 5f 63 6f 6e 66 69 67 80"))
			return err
		}, "wire: EngineZmqAddresses.outputs: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %v (%T), want a *DecodeError", err, err)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

// TestHugeHeaderDoesNotAllocate: a length prefix is checked before anything is
// allocated for it.
func TestHugeHeaderDoesNotAllocate(t *testing.T) {
	frame := unhex(t, "94 00 91 92 a1 78 dd ff ff ff f0 00 00 00 00 00 00 00 00 00")
	var d OutputsDecoder
	var o EngineCoreOutputs
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if d.Decode([][]byte{frame}, &o) == nil {
			t.Fatal("decoded")
		}
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / 100; perRun > 1024 {
		t.Errorf("%d bytes allocated per decode", perRun)
	}
}

// TestEveryPrefixFails: every strict prefix of every golden message is an error,
// never a panic, and never a silent success.
func TestEveryPrefixFails(t *testing.T) {
	for _, f := range loadGolden(t) {
		if f.Name == "engine_core_dead" || f.Name == "registration_empty" {
			continue
		}
		body := 0
		if len(f.frames[0]) == 1 && len(f.frames) > 1 {
			body = 1
		}
		for n := range len(f.frames[body]) {
			frames := append([][]byte(nil), f.frames...)
			frames[body] = f.frames[body][:n]
			if n == 0 && f.Name == "registration" {
				continue // an empty registration frame is valid (old engines)
			}
			if err := decodeAny(f.Name, frames[body:]); err == nil {
				t.Errorf("%s: prefix of %d bytes decoded without error", f.Name, n)
			}
		}
	}
}

// decodeAny runs the decoder for the named fixture's message type.
func decodeAny(name string, frames [][]byte) error {
	var err error
	switch {
	case len(name) > 4 && name[:4] == "add_":
		err = DecodeAdd(frames, new(EngineCoreRequest))
	case name == "abort":
		_, err = DecodeAbort(frames[0])
	case len(name) > 8 && name[:8] == "utility_":
		_, _, _, _, err = DecodeUtility(frames[0])
	case len(name) >= 13 && name[:13] == "start_dp_wave":
		_, err = DecodeStartDPWave(frames[0])
	case len(name) > 8 && name[:8] == "outputs_":
		err = DecodeOutputs(frames, new(EngineCoreOutputs))
	case name == "hello" || name == "ready_dp":
		_, err = DecodeHandshakeStatus(frames[0])
	case len(name) >= 4 && name[:4] == "init":
		_, err = DecodeInit(frames[0])
	case name == "registration":
		_, err = DecodeReadyResponse(frames[0])
	case name == "coordinator_publish":
		_, err = DecodeCoordinatorPublish(frames[0])
	case name == "first_req":
		_, err = DecodeFirstReq(frames[0])
	}
	return err
}

func TestEncodeRefusals(t *testing.T) {
	if _, _, err := AppendAdd(nil, nil); !errors.Is(err, ErrNilRequest) {
		t.Errorf("nil request: %v", err)
	}
	both := &EngineCoreRequest{RequestID: "x", Sampling: new(SamplingParams), PoolingParams: Raw{0x90}}
	if _, _, err := AppendAdd(nil, both); !errors.Is(err, ErrParamsExclusive) {
		t.Errorf("both params: %v", err)
	}
	if _, err := AppendUtility(nil, 0, 1, "m", Raw{0x80}); !errors.Is(err, ErrUtilityArgsArray) {
		t.Errorf("map args: %v", err)
	}
	if _, err := AppendUtility(nil, 0, 1, "m", Raw{0x92, 0x01}); !errors.Is(err, ErrUtilityArgsArray) {
		t.Errorf("truncated args: %v", err)
	}
	bad := &EngineCoreOutputs{SchedulerStats: &SchedulerStats{Raw: Raw{0x81}}}
	if _, _, err := AppendOutputs(nil, bad); err == nil {
		t.Error("malformed stats raw accepted")
	}
}

func TestEncodeEmptyRaw(t *testing.T) {
	b, err := AppendUtility(nil, 0, 1, "m", Raw{})
	if err != nil || string(b) != "\x94\x00\x01\xa1m\x90" {
		t.Errorf("empty args: %x %v", b, err)
	}
	q := goodRequest()
	q.KVHints = Raw{}
	body, _, err := AppendAdd(nil, q)
	if err != nil || !validRaw(body) {
		t.Errorf("empty kv_hints: %x %v", body, err)
	}
}

// TestAppendIntsForms: the fast path writes the same smallest forms as appendInt.
func TestAppendIntsForms(t *testing.T) {
	v := []int64{0, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, -1, -32, -33, -129, -32769, -1 << 31, -1<<31 - 1, 1<<63 - 1, -1 << 63, 5}
	for i := range v {
		var want []byte
		want = appendArrayHeader(want, len(v[i:]))
		for _, x := range v[i:] {
			want = appendInt(want, x)
		}
		if got := appendInts([]byte{}, v[i:]); string(got) != string(want) {
			t.Errorf("from %d: got %x want %x", i, got, want)
		}
	}
}
