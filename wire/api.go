package wire

// This file fixes the codec API the other packages build on. Bodies are filled in by
// the codec files; every decoder returns *DecodeError on bad input and never panics.

import "fmt"

// DecodeError says what failed where: "wire: EngineCoreOutput.new_token_ids: expected
// array, got str".
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

// Encoders (append into dst, return the extended slice). Aux frames: AppendAdd returns
// the body; tensors >= 256 bytes are referenced by aux index and returned in aux.
//
//	func AppendAdd(dst []byte, r *EngineCoreRequest) (body []byte, aux [][]byte, err error)
//	func AppendAbort(dst []byte, ids []string) []byte
//	func AppendUtility(dst []byte, clientIndex int64, callID uint64, method string, args Raw) ([]byte, error) // args: raw msgpack array
//	func AppendStartDPWave(dst []byte, w StartDPWave) []byte
//	func AppendOutputs(dst []byte, o *EngineCoreOutputs) ([]byte, [][]byte, error)   // the mock engine's side
//	func AppendHandshakeStatus(dst []byte, h *HandshakeStatus) []byte
//	func AppendInit(dst []byte, in *HandshakeInit) []byte
//	func AppendReadyResponse(dst []byte, r *ReadyResponse) []byte
//	func AppendCoordinatorPublish(dst []byte, p *CoordinatorPublish) []byte
//	func AppendFirstReq(dst []byte, f FirstReq) []byte
//
// Decoders (frames[0] is the msgpack body; frames[1:] are aux frames):
//
//	func DecodeAdd(frames [][]byte, r *EngineCoreRequest) error        // strict: what an engine accepts
//	func DecodeAbort(body []byte) ([]string, error)
//	func DecodeUtility(body []byte) (clientIndex int64, callID uint64, method string, args Raw, err error)
//	func DecodeStartDPWave(body []byte) (StartDPWave, error)
//	type OutputsDecoder struct{...}  // reusable; Decode(frames, *EngineCoreOutputs) error reuses the Outputs slice
//	func DecodeOutputs(frames [][]byte, o *EngineCoreOutputs) error
//	func DecodeHandshakeStatus(body []byte) (HandshakeStatus, error)
//	func DecodeInit(body []byte) (HandshakeInit, error)
//	func DecodeReadyResponse(body []byte) (ReadyResponse, error)     // empty body -> Empty=true
//	func DecodeCoordinatorPublish(body []byte) (CoordinatorPublish, error)
//	func DecodeFirstReq(body []byte) (FirstReq, error)
//
// Helpers added with the codecs:
//
//	func TypeFrame(t byte) ([]byte, error)            // the 1-byte type frame; refuses 04, 05 and anything above
//	func ParseRequestType(frame []byte) (byte, error) // the engine side of TypeFrame
//	func (p *SamplingParams) SetEOS(primary OptInt, generationEOS ...int64) // update_from_generation_config
//	const AuxThreshold = 256                          // tensors of this many bytes or more go to aux frames
//	type EncodeError, ValidationError; ErrNilRequest, ErrParamsExclusive, ErrBadRequestType, ErrUtilityArgsArray
//
// Aliasing: decoded Raw values, SchedulerStats.Raw and Tensor.Data point into the
// frames they came from (no copy); keep the frames alive, and unmodified, as long as
// those are used. Strings are always copies.
//
// Validation before sending (the engine's input thread dies on what its ADD decode,
// SamplingParams' post-init and the tensor hook reject; see accept.go):
//
//	func (p *SamplingParams) Prepare() error // __post_init__ in vLLM's order: rewrites, _verify_args on the caller's values, greedy reset
//	func (r *EngineCoreRequest) Validate() error // EngineAccepts + the frontend's and this project's rules
//	func (p *SamplingParams) Validate() error
//	func EngineAccepts(r *EngineCoreRequest) error // vLLM's engine-side rules only; the mock engine dies on these
//	func (t *Tensor) CheckTorch() error          // dtype known to torch, len(data) == prod(shape) * itemsize
//	func TorchDTypeSize(name string) (size int, canonical, ok bool)
//	func (p *SamplingParams) Normalize()         // Prepare's rewrites without its checks (for params already checked)
//
// Order for a request we build: SetEOS, Prepare, then Validate. DecodeAdd,
// DecodeAbort and DecodeUtility refuse invalid UTF-8 anywhere in a str.
