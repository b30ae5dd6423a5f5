package wire

// Request type bytes: the first frame an engine's input DEALER receives after the
// identity. The engine parses it with the enum constructor, so an unknown byte kills
// its input thread silently; we never encode anything but these four.
const (
	RequestAdd         byte = 0x00
	RequestAbort       byte = 0x01
	RequestStartDPWave byte = 0x02
	RequestUtility     byte = 0x03
	// 0x04 (EXECUTOR_FAILED) and 0x05 (WAKEUP) are engine-internal sentinels and are
	// refused by every encoder here.
)

// EngineCoreDead is the 16-byte sentinel an engine sends as a single bare frame on
// its output socket before it exits.
var EngineCoreDead = []byte("ENGINE_CORE_DEAD")

// IsEngineCoreDead reports whether a received message is the death sentinel:
// exactly one frame equal to ENGINE_CORE_DEAD, as vLLM's Python frontend checks.
func IsEngineCoreDead(frames [][]byte) bool {
	return len(frames) == 1 && string(frames[0]) == "ENGINE_CORE_DEAD"
}

// Identity is an engine's ZeroMQ routing identity: its data-parallel rank as two
// little-endian bytes (rank 1 = 01 00, rank 256 = 00 01).
type Identity [2]byte

// IdentityOf returns the identity of rank (0 <= rank < 65536).
func IdentityOf(rank int) Identity { return Identity{byte(rank), byte(rank >> 8)} }

// Rank returns the rank encoded in the identity.
func (id Identity) Rank() int { return int(id[0]) | int(id[1])<<8 }

// Bytes returns the identity as a 2-byte slice (a fresh copy).
func (id Identity) Bytes() []byte { return []byte{id[0], id[1]} }

// ParseIdentity reads a 2-byte identity frame.
func ParseIdentity(b []byte) (Identity, bool) {
	if len(b) != 2 {
		return Identity{}, false
	}
	return Identity{b[0], b[1]}, true
}

// Raw is an undecoded msgpack value carried through unchanged (a field whose content
// switchyard does not interpret, such as multimodal features or structured-output
// constraints). A nil Raw means msgpack nil (or absent).
type Raw []byte

// OptInt is an optional integer (Python `int | None`).
type OptInt struct {
	Value int64
	Valid bool
}

// SomeInt returns a set OptInt.
func SomeInt(v int64) OptInt { return OptInt{Value: v, Valid: true} }

// OptBool is an optional bool (Python `bool | None`).
type OptBool struct {
	Value bool
	Valid bool
}

// OptString is an optional string (Python `str | None`).
type OptString struct {
	Value string
	Valid bool
}

// SomeString returns a set OptString.
func SomeString(s string) OptString { return OptString{Value: s, Valid: true} }

// FinishReason is EngineCoreOutput.finish_reason.
type FinishReason int8

// Finish reasons on the wire; FinishNone is our marker for "not finished" (nil).
const (
	FinishNone       FinishReason = -1
	FinishStop       FinishReason = 0
	FinishLength     FinishReason = 1
	FinishAbort      FinishReason = 2
	FinishError      FinishReason = 3
	FinishRepetition FinishReason = 4
)

// String returns the OpenAI/vLLM name ("stop", "length", "abort", "error", "repetition").
func (f FinishReason) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	case FinishRepetition:
		return "repetition"
	case FinishNone:
		return ""
	}
	return "unknown"
}

// Tensor is vLLM's (dtype, shape, data) encoding of a torch tensor or numpy ndarray.
// Data holds the raw bytes whether they came inline (ext 3) or from an aux frame;
// AuxIndex is the frame index it came from (0 = inline).
type Tensor struct {
	DType    string
	Shape    []int64
	Data     []byte
	AuxIndex int
}

// LoRARequest is vLLM's LoRARequest (array_like):
// [lora_name, lora_int_id, lora_path, base_model_name, tensorizer_config_dict,
// load_inplace, is_3d_lora_weight].
type LoRARequest struct {
	Name                 string
	IntID                int64
	Path                 string
	BaseModelName        OptString
	TensorizerConfigDict Raw
	LoadInplace          bool
	Is3DLoRAWeight       bool
}
