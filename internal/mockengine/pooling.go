package mockengine

// A pooling model: what a vLLM engine started with an embedding, classification or
// reward model answers. A pooling request (pooling_params set, no sampling_params)
// is finished in its first step with one pooling_output tensor and no tokens,
// finish reason STOP, as vLLM's scheduler finishes a request whose pooler output
// arrived. The values are a deterministic function of the prompt ids, so a test
// can compute what a client must receive:
//
//	raw[i] = tokenOf(seqHash(h, i)) / 2^16 - 0.5 for the prompt's hash h,
//	         in [-0.5, 0.5), i < Hidden (or Labels)
//	embed:          raw[:dimensions], L2-normalised when activation is on
//	classify/score: Labels (score: 1) logits, softmax (sigmoid for one) when on
//	token_*:        one row per prompt token, from the hash of the prompt up to it
//
// An engine of a release without the task would refuse it; the mock answers a task
// it does not serve with a request error (finish reason ERROR), as vLLM's
// EngineCore.add_request raises "Unsupported task" for it.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/switchyard-llm/switchyard/wire"
)

// PoolingModel makes the mock engine a pooling model.
type PoolingModel struct {
	// Tasks are what get_supported_tasks answers, in vLLM's names: "embed",
	// "token_embed", "classify", "score", "token_classify" (or "encode" for the
	// oldest releases). Empty = ["embed", "token_embed"].
	Tasks  []string
	Hidden int    // embedding size; 0 = DefaultPoolingHidden
	Labels int    // classifier outputs; 0 = 2
	DType  string // pooling_output dtype: float32 (default), float16 or bfloat16
}

// DefaultPoolingHidden is the mock's embedding size when none is given.
const DefaultPoolingHidden = 32

func (m *PoolingModel) tasks() []string {
	if len(m.Tasks) == 0 {
		return []string{"embed", "token_embed"}
	}
	return m.Tasks
}

func (m *PoolingModel) hidden() int {
	if m.Hidden > 0 {
		return m.Hidden
	}
	return DefaultPoolingHidden
}

func (m *PoolingModel) labels() int {
	if m.Labels > 0 {
		return m.Labels
	}
	return 2
}

// tasksRaw is get_supported_tasks' result: a tuple of str, a msgpack array.
func (m *PoolingModel) tasksRaw() wire.Raw {
	b := []byte{0x90 | byte(len(m.tasks()))}
	for _, t := range m.tasks() {
		b = append(b, 0xa0|byte(len(t)))
		b = append(b, t...)
	}
	return b
}

// poolReq is a pooling request's state in the scheduler.
type poolReq struct {
	params wire.PoolingParams
	prompt []int64
}

// decodePooling turns an ADD's pooling_params into the typed form for the
// scheduler. A layout without PoolingParams, or bytes its engine could not decode,
// is fatal: a real engine's input thread dies on them.
func (e *engine) decodePooling(req *wire.EngineCoreRequest) error {
	if req.PoolingParams == nil {
		return nil
	}
	p, err := e.cfg.Layout.DecodePooling(req.PoolingParams)
	if err != nil {
		return fmt.Errorf("%w: ADD %q: %w", ErrInputThreadDied, req.RequestID, err)
	}
	req.Pooling, req.PoolingParams = p, nil
	return nil
}

// PoolingValues is what the mock's pooling model answers for prompt and p, as
// float64s before the tensor's dtype rounds them: shape and row-major data.
func (m *PoolingModel) PoolingValues(prompt []int64, p *wire.PoolingParams) (shape []int64, data []float64) {
	act := !p.Activation.Valid || p.Activation.Value
	switch p.Task {
	case "token_embed", "token_classify", "encode":
		width := m.hidden()
		if p.Task == "token_classify" {
			width = m.labels()
		}
		h := seqSeed
		for _, t := range prompt {
			h = seqHash(h, t)
			row := m.row(h, p, width, act)
			data = append(data, row...)
			width = len(row)
		}
		return []int64{int64(len(prompt)), int64(width)}, data
	case "classify", "score":
		n := m.labels()
		if p.Task == "score" {
			n = 1
		}
		data = m.row(promptHash(prompt), p, n, act)
		return []int64{int64(len(data))}, data
	}
	data = m.row(promptHash(prompt), p, m.hidden(), act)
	return []int64{int64(len(data))}, data
}

func promptHash(prompt []int64) uint64 {
	h := seqSeed
	for _, t := range prompt {
		h = seqHash(h, t)
	}
	return h
}

// row is one output row: width raw values, then the task's dimensions and
// activation.
func (m *PoolingModel) row(h uint64, p *wire.PoolingParams, width int, act bool) []float64 {
	v := make([]float64, width)
	for i := range v {
		v[i] = float64(tokenOf(seqHash(h, int64(i))))/65536 - 0.5
	}
	switch p.Task {
	case "embed", "token_embed", "encode":
		if p.Dimensions.Valid && p.Dimensions.Value < int64(width) {
			v = v[:p.Dimensions.Value]
		}
		if act {
			var ss float64
			for _, x := range v {
				ss += x * x
			}
			if n := math.Sqrt(ss); n > 0 {
				for i := range v {
					v[i] /= n
				}
			}
		}
	default:
		if act {
			activate(v)
		}
	}
	return v
}

// activate is vLLM's classifier activation: sigmoid for one label, softmax else.
func activate(v []float64) {
	if len(v) == 1 {
		v[0] = 1 / (1 + math.Exp(-v[0]))
		return
	}
	hi := slices.Max(v)
	var sum float64
	for i := range v {
		v[i] = math.Exp(v[i] - hi)
		sum += v[i]
	}
	for i := range v {
		v[i] /= sum
	}
}

// poolOutput finishes q's step: its tensor, or an error for a task the model
// does not serve.
func (s *Scheduler) poolOutput(q *request, o *wire.EngineCoreOutput) {
	m := s.Pooling
	if m == nil || !slices.Contains(m.tasks(), q.pool.params.Task) {
		o.FinishReason = wire.FinishError
		return
	}
	shape, vals := m.PoolingValues(q.pool.prompt, &q.pool.params)
	o.PoolingOutput = &wire.Tensor{DType: m.dtype(), Shape: shape, Data: encodeFloats(vals, m.dtype())}
	o.FinishReason = wire.FinishStop
}

func (m *PoolingModel) dtype() string {
	if m.DType == "" {
		return "float32"
	}
	return m.DType
}

// encodeFloats writes vals little-endian in dtype (float16 and bfloat16 round to
// nearest even).
func encodeFloats(vals []float64, dtype string) []byte {
	switch dtype {
	case "float16", "bfloat16":
		b := make([]byte, 2*len(vals))
		for i, v := range vals {
			var h uint16
			if dtype == "bfloat16" {
				h = bfloat16Of(float32(v))
			} else {
				h = float16Of(float32(v))
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	}
	return b
}

func bfloat16Of(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1 // round to nearest even (no NaN comes here)
	return uint16(u >> 16)
}

// float16Of narrows a float32 in [-1, 1] (the mock's values) to a half, rounding
// to nearest even; values below the half's normal range flush to zero.
func float16Of(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23&0xff) - 127 + 15
	mant := u & 0x7fffff
	if exp <= 0 {
		return sign
	}
	m := mant >> 13
	if rem := mant & 0x1fff; rem > 0x1000 || rem == 0x1000 && m&1 == 1 {
		m++
		if m == 0x400 {
			m = 0
			exp++
		}
	}
	return sign | uint16(exp)<<10 | uint16(m)
}
