package httpapi

// The OpenAI/vLLM completions vocabulary and its translation into engine-core requests.
// Everything here is pure (no IO, no clock, no randomness: ids and time come in), so
// the rules that decide what reaches an engine are table-tested without sockets.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// Limits on one HTTP completion. They bound the fan-out one body can cause: vLLM has no
// cap on n, but every choice is a separate engine request here.
const (
	MaxChoices       = 128 // n times the number of prompts
	DefaultMaxTokens = 16  // OpenAI's and vLLM's completions default
	// DefaultMaxBodyBytes is --max-body-bytes' default: room for a prompt of
	// apicore.MaxPromptTokens six-digit token ids, and little more.
	DefaultMaxBodyBytes = 16 << 20
)

// CompletionRequest is the body of POST /v1/completions. Pointer fields distinguish
// "absent" from zero. Unknown fields are ignored, as vLLM's pydantic models do, so
// stock OpenAI clients that send extras keep working.
type CompletionRequest struct {
	Model             string         `json:"model"`
	MaxTokens         *int64         `json:"max_tokens"`
	Temperature       *float64       `json:"temperature"`
	TopP              *float64       `json:"top_p"`
	TopK              *int64         `json:"top_k"`
	MinP              *float64       `json:"min_p"`
	Seed              *int64         `json:"seed"`
	StopTokenIDs      []int64        `json:"stop_token_ids"`
	IgnoreEOS         bool           `json:"ignore_eos"`
	MinTokens         int64          `json:"min_tokens"`
	Priority          int64          `json:"priority"`
	Stream            bool           `json:"stream"`
	StreamOptions     *StreamOptions `json:"stream_options"`
	N                 *int64         `json:"n"`
	PresencePenalty   *float64       `json:"presence_penalty"`
	FrequencyPenalty  *float64       `json:"frequency_penalty"`
	RepetitionPenalty *float64       `json:"repetition_penalty"`
	CacheSalt         *string        `json:"cache_salt"`
	RequestID         string         `json:"request_id"` // vLLM extra: the user-visible id

	// Fields that need text: without --tokenizer a request that sets them gets a
	// 400 naming the field rather than a silently different answer (textreq.go).
	Stop     json.RawMessage `json:"stop"`
	Echo     bool            `json:"echo"`
	Logprobs *int64          `json:"logprobs"`
	BestOf   *int64          `json:"best_of"`
	Suffix   *string         `json:"suffix"`

	// vLLM's text extras, honoured with --tokenizer (textreq.go).
	IncludeStopStrInOutput     bool            `json:"include_stop_str_in_output"`
	SkipSpecialTokens          *bool           `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens *bool           `json:"spaces_between_special_tokens"`
	ReturnTokenIDs             bool            `json:"return_token_ids"`
	AddSpecialTokens           *bool           `json:"add_special_tokens"`
	PromptLogprobs             *int64          `json:"prompt_logprobs"`
	ResponseFormat             json.RawMessage `json:"response_format"`
	StructuredOutputs          json.RawMessage `json:"structured_outputs"`
	GuidedJSON                 json.RawMessage `json:"guided_json"`
	GuidedRegex                *string         `json:"guided_regex"`
	GuidedChoice               []string        `json:"guided_choice"`
	GuidedGrammar              *string         `json:"guided_grammar"`
	GuidedWhitespacePattern    *string         `json:"guided_whitespace_pattern"`

	// prompts is the prompt field, parsed by the decoder as it streams in;
	// textPrompts holds it instead when it is a string or a list of strings.
	prompts     [][]int64
	textPrompts []string
	// stop is Stop parsed (a string or a list of strings), by validateText.
	stop []string
	// structured is the structured_outputs map for the engine (msgpack), by validateText.
	structured []byte
}

// APIError is an error answered in the OpenAI/vLLM shape
// {"error": {"message", "type", "param", "code"}}; Code is the HTTP status.
type APIError struct {
	Status  int
	Type    string
	Message string
	Param   string // the offending field; empty = null
	// ConnectedRanks is set for InvalidDataParallelRank only.
	ConnectedRanks []int
	// RetryAfter, when > 0, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (e *APIError) Error() string { return e.Message }

// Error types (vLLM's names for the HTTP classes, plus the Rust frontend's typed one).
const (
	TypeBadRequest         = "BadRequestError"
	TypeNotFound           = "NotFoundError"
	TypeMethodNotAllowed   = "MethodNotAllowedError"
	TypeUnauthorized       = "Unauthorized"
	TypeServiceUnavailable = "ServiceUnavailableError"
	TypeInternal           = "InternalServerError"
)

func badRequest(param, format string, args ...any) *APIError {
	return &APIError{Status: 400, Type: TypeBadRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// InvalidRankError builds the 400 for a rank that is not connected, with vLLM-Rust's
// exact message: the text of the dispatcher's InvalidDataParallelRank, which the
// client protocol sends as it is.
func InvalidRankError(rank int, connected []int) *APIError {
	if connected == nil {
		connected = []int{}
	}
	return &APIError{
		Status:         400,
		Type:           apicore.TypeInvalidDataParallelRank,
		Param:          "X-data-parallel-rank",
		Message:        (&dispatcher.InvalidDataParallelRank{Rank: rank, ConnectedRanks: connected}).Error(),
		ConnectedRanks: connected,
	}
}

// ErrorBody is the JSON shape of an APIError.
// ErrorBody is the JSON body of an error answer (OpenAI's shape).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is ErrorBody's error.
type ErrorDetail struct {
	Message        string  `json:"message"`
	Type           string  `json:"type"`
	Param          *string `json:"param"`
	Code           int     `json:"code"`
	ConnectedRanks []int   `json:"connected_ranks,omitzero"` // [] is kept: no rank connected
}

func (e *APIError) body() ErrorBody {
	d := ErrorDetail{Message: e.Message, Type: e.Type, Code: e.Status, ConnectedRanks: e.ConnectedRanks}
	if e.Param != "" {
		p := e.Param
		d.Param = &p
	}
	return ErrorBody{Error: d}
}

// Prompts returns the prompt field: a list of token ids, or a list of such lists,
// checked as it was decoded. Strings are refused: switchyard forwards token ids, as
// vLLM run with --skip-tokenizer-init does.
func (r *CompletionRequest) Prompts() ([][]int64, error) {
	if r.textPrompts != nil {
		return nil, errNeedsTokenizer("prompt")
	}
	if r.prompts == nil {
		return nil, badRequest("prompt", "prompt is required: a list of token ids or a list of such lists")
	}
	return r.prompts, nil
}

// Choices returns n (default 1).
func (r *CompletionRequest) Choices() int64 {
	if r.N == nil {
		return 1
	}
	return *r.N
}

// Validate checks every field against vLLM's SamplingParams rules and switchyard's
// limits, naming the field at fault. It does not look at the prompt (see Prompts).
// The fields that need text are refused (see validateText for serve with a tokenizer).
func (r *CompletionRequest) Validate() error {
	if err := r.validateSampling(); err != nil {
		return err
	}
	return r.refuseUnsupported()
}

// validateSampling is Validate without the text fields.
func (r *CompletionRequest) validateSampling() error {
	if r.N != nil && (*r.N < 1 || *r.N > MaxChoices) {
		return badRequest("n", "n must be between 1 and %d, got %d", MaxChoices, *r.N)
	}
	if r.MaxTokens != nil && *r.MaxTokens < 1 {
		return badRequest("max_tokens", "max_tokens must be at least 1, got %d", *r.MaxTokens)
	}
	maxTokens := r.maxTokens()
	if r.MinTokens < 0 {
		return badRequest("min_tokens", "min_tokens must be greater than or equal to 0, got %d", r.MinTokens)
	}
	if r.MinTokens > maxTokens {
		return badRequest("min_tokens", "min_tokens must be less than or equal to max_tokens=%d, got %d", maxTokens, r.MinTokens)
	}
	if err := floatIn("temperature", r.Temperature, 0, 2, true, true); err != nil {
		return err
	}
	if r.TopP != nil && !(*r.TopP > 0 && *r.TopP <= 1) {
		return badRequest("top_p", "top_p must be in (0, 1], got %v", *r.TopP)
	}
	if r.TopK != nil && *r.TopK < -1 {
		return badRequest("top_k", "top_k must be -1 (disable), 0 (disable) or at least 1, got %d", *r.TopK)
	}
	if err := floatIn("min_p", r.MinP, 0, 1, true, true); err != nil {
		return err
	}
	if err := floatIn("presence_penalty", r.PresencePenalty, -2, 2, true, true); err != nil {
		return err
	}
	if err := floatIn("frequency_penalty", r.FrequencyPenalty, -2, 2, true, true); err != nil {
		return err
	}
	if r.RepetitionPenalty != nil && !(*r.RepetitionPenalty > 0) || r.RepetitionPenalty != nil && math.IsInf(*r.RepetitionPenalty, 0) {
		return badRequest("repetition_penalty", "repetition_penalty must be greater than 0, got %v", *r.RepetitionPenalty)
	}
	for i, t := range r.StopTokenIDs {
		if t < 0 {
			return badRequest("stop_token_ids", "stop_token_ids[%d]: token id %d is negative", i, t)
		}
	}
	if r.CacheSalt != nil && *r.CacheSalt == "" {
		// vLLM's words (CompletionRequest.check_cache_salt_support).
		return badRequest("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	if len(r.RequestID) > apicore.MaxRequestIDLen {
		return badRequest("request_id", "request_id is %d bytes, more than the limit of %d", len(r.RequestID), apicore.MaxRequestIDLen)
	}
	if len(r.Model) > apicore.MaxModelNameLen {
		return badRequest("model", "model is %d bytes, more than the limit of %d", len(r.Model), apicore.MaxModelNameLen)
	}
	if r.StreamOptions != nil && !r.Stream {
		return badRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	return nil
}

// refuseUnsupported rejects the OpenAI fields that need text or log-probabilities.
func (r *CompletionRequest) refuseUnsupported() error {
	if stop := bytes.TrimSpace(r.Stop); len(stop) > 0 && !bytes.Equal(stop, []byte("null")) &&
		!bytes.Equal(stop, []byte("[]")) && !bytes.Equal(stop, []byte(`""`)) {
		return errNeedsTokenizer("stop")
	}
	if r.Echo {
		return errNeedsTokenizer("echo")
	}
	if r.Logprobs != nil {
		return errNeedsTokenizer("logprobs")
	}
	if r.BestOf != nil && *r.BestOf != r.Choices() {
		return badRequest("best_of", "best_of is not supported (it must equal n)")
	}
	if r.Suffix != nil && *r.Suffix != "" {
		return badRequest("suffix", "suffix is not supported")
	}
	return nil
}

func floatIn(name string, v *float64, lo, hi float64, loIncl, hiIncl bool) error {
	if v == nil {
		return nil
	}
	x := *v
	ok := !math.IsNaN(x) && (x > lo || loIncl && x == lo) && (x < hi || hiIncl && x == hi)
	if !ok {
		return badRequest(name, "%s must be in [%v, %v], got %v", name, lo, hi, x)
	}
	return nil
}

func (r *CompletionRequest) maxTokens() int64 {
	if r.MaxTokens == nil {
		return DefaultMaxTokens
	}
	return *r.MaxTokens
}

// Translate holds what the engine requests need beyond the body.
type Translate struct {
	// BaseID is the user-visible completion id ("cmpl-<random>"); engine request i is
	// BaseID-i, unique among live requests because BaseID is random.
	BaseID string
	// ID, when set, is the user-visible id instead of BaseID (X-Request-Id,
	// requestid.go); the engine ids stay BaseID-i.
	ID string
	// Model is what serve knows of the model: the EOS ids (serve --eos-token-id;
	// none means the engines stop on max_tokens and stop_token_ids only).
	Model apicore.ModelRules
	// Rank is the X-data-parallel-rank pin, if any.
	Rank wire.OptInt
	// ArrivalTime is the frontend wall clock in seconds since the epoch.
	ArrivalTime float64
	// Text: serve has a tokenizer, and the text fields go to the engine as vLLM
	// sends them (setText).
	Text bool
	// LoRA is the adapter the request's model names (lora.go); nil = the model.
	LoRA *wire.LoRARequest
}

// EngineRequests turns a validated body into one engine request per choice: prompt
// major, then n (vLLM's choice order), each with n=1 because fanning out is the
// frontend's job. The sampling parameters are built once and completed in vLLM's
// order (SetEOS, then Prepare: the rewrites, the range checks on the caller's own
// values, then the greedy reset), so a combination vLLM refuses, such as
// temperature 0 with top_p 0, is refused here too, whatever Validate let through:
// the error is a 400 naming the field. Choice i of a prompt gets the seed seed+i,
// as vLLM's ParentRequest gives its children, or the n choices would be n copies
// of one completion.
func (r *CompletionRequest) EngineRequests(prompts [][]int64, t Translate) ([]*wire.EngineCoreRequest, error) {
	n := int(r.Choices())
	params := r.samplingParams(t.Model)
	if t.Text {
		r.setText(&params)
	}
	if err := params.Prepare(); err != nil {
		return nil, validationAPIError(err)
	}
	if params.Seed.Valid && n > 1 && params.Seed.Value > math.MaxInt64-int64(n-1) {
		return nil, badRequest("seed", "seed %d + n - 1 overflows a 64-bit integer (each choice gets seed + its index)", params.Seed.Value)
	}
	out := make([]*wire.EngineCoreRequest, 0, len(prompts)*n)
	for _, p := range prompts {
		for j := range n {
			i := len(out)
			child := params
			// Each request owns its slices: requests are encoded concurrently, and
			// the dispatcher may adjust one request's copy.
			child.StopTokenIDs = slices.Clone(params.StopTokenIDs)
			child.AllStopTokenIDs = slices.Clone(params.AllStopTokenIDs)
			if params.Seed.Valid {
				child.Seed = wire.SomeInt(params.Seed.Value + int64(j))
			}
			out = append(out, &wire.EngineCoreRequest{
				RequestID:        t.BaseID + "-" + strconv.Itoa(i),
				PromptTokenIDs:   p,
				Sampling:         &child,
				ArrivalTime:      t.ArrivalTime,
				DataParallelRank: t.Rank,
				CacheSalt:        optString(r.CacheSalt),
				Priority:         r.Priority,
				ExternalReqID:    wire.SomeString(t.BaseID),
				LoRA:             t.LoRA,
			})
		}
	}
	return out, nil
}

// validationAPIError turns a *wire.ValidationError into a 400 naming the field as
// the body names it (without the wire's "sampling_params." prefix).
func validationAPIError(err error) *APIError {
	var inv *wire.ValidationError
	if !errors.As(err, &inv) {
		return badRequest("", "%v", err)
	}
	field := strings.TrimPrefix(inv.Field, "sampling_params.")
	if field == "prompt_token_ids" {
		field = "prompt"
	}
	return badRequest(field, "%s: %s", field, inv.Msg)
}

func optString(s *string) wire.OptString {
	if s == nil {
		return wire.OptString{}
	}
	return wire.SomeString(*s)
}

// samplingParams fills SamplingParams as vLLM's Python frontend would before sending:
// defaults, the user's knobs, max_tokens always set, the EOS ids from the model
// config (update_from_generation_config). Prepare comes next.
func (r *CompletionRequest) samplingParams(m apicore.ModelRules) wire.SamplingParams {
	sp := wire.DefaultSamplingParams()
	sp.N = 1
	sp.MaxTokens = wire.SomeInt(r.maxTokens())
	sp.MinTokens = r.MinTokens
	sp.IgnoreEOS = r.IgnoreEOS
	if r.StopTokenIDs != nil {
		sp.StopTokenIDs = append([]int64{}, r.StopTokenIDs...)
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&sp.Temperature, r.Temperature)
	setF(&sp.TopP, r.TopP)
	setF(&sp.MinP, r.MinP)
	setF(&sp.PresencePenalty, r.PresencePenalty)
	setF(&sp.FrequencyPenalty, r.FrequencyPenalty)
	setF(&sp.RepetitionPenalty, r.RepetitionPenalty)
	if r.TopK != nil {
		sp.TopK = *r.TopK
	}
	if r.Seed != nil {
		sp.Seed = wire.SomeInt(*r.Seed)
	}
	// The engine streams per-step deltas whatever output_kind says; we accumulate
	// ourselves, so ask for what we do with them. We never see text, so no
	// detokenization is asked for (vLLM with --skip-tokenizer-init does the same).
	sp.OutputKind = 1 // DELTA
	sp.Detokenize = false
	m.SetEOS(&sp)
	return sp
}

// visibleID is the answer's id: ID, else BaseID.
func (t *Translate) visibleID() string {
	if t.ID != "" {
		return t.ID
	}
	return t.BaseID
}
