package wire

import (
	"errors"
	"fmt"
)

// Encode-side errors. The encoders refuse what an engine would fail to decode,
// because a body that fails msgspec's typed decode kills the engine's input thread.
var (
	ErrNilRequest       = errors.New("wire: nil EngineCoreRequest")
	ErrParamsExclusive  = errors.New("wire: EngineCoreRequest needs exactly one of sampling_params and pooling_params")
	ErrBadRequestType   = errors.New("wire: request type byte is not ADD, ABORT, START_DP_WAVE or UTILITY")
	ErrUtilityArgsArray = errors.New("wire: utility args must be a msgpack array")
)

// EncodeError says which value could not be encoded and why.
type EncodeError struct {
	Type  string
	Field string
	Msg   string
}

func (e *EncodeError) Error() string {
	if e.Field == "" {
		return "wire: encoding " + e.Type + ": " + e.Msg
	}
	return "wire: encoding " + e.Type + "." + e.Field + ": " + e.Msg
}

// ValidationError names the field of a request that an engine would reject.
type ValidationError struct {
	Field string // e.g. "sampling_params.top_p"
	Msg   string
}

func (e *ValidationError) Error() string { return "wire: invalid " + e.Field + ": " + e.Msg }

// DecodeError says what failed where: "wire: EngineCoreOutput.new_token_ids: expected
// array, got str". Every decoder returns one on bad input; none panics.
type DecodeError struct {
	Type   string // e.g. "EngineCoreOutput"
	Field  string // e.g. "new_token_ids"; empty for the whole value
	Offset int    // byte offset into the frame
	Msg    string // e.g. "expected array, got str"
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("wire: %s: %s", e.Type, e.Msg)
	}
	return fmt.Sprintf("wire: %s.%s: %s", e.Type, e.Field, e.Msg)
}
