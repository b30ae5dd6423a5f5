package wire

// Layouts: vLLM's engine-core structs are msgspec array_like structs, so which field
// sits at which index is the wire format, and it changes between vLLM releases
// (fields are appended, inserted in the middle and removed). A Layout names, for one
// range of releases, the ordered fields of every positional struct, the
// SamplingParams keys the engine knows, where the EOS id travels, the finish reasons
// it has and how its handshake looks. Layouts are data (JSON, built in or loaded from
// a file an operator generated with vLLM's own classes); New precomputes index tables
// once so the codec's hot loops switch on a small field id per position and never
// look a name up.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// Field is one field of a positional struct, as a layout file names it.
type Field struct {
	Name string
	Type string // vLLM's annotation, for messages only
	// Default is vLLM's default as msgpack; what an encoder writes for a field
	// switchyard does not know. Nil for a required field.
	Default Raw
}

// Layout is one vLLM wire layout. Build one with ParseLayout or take a built-in
// (BuiltinLayouts); the zero value is not usable. A Layout is immutable and safe for
// concurrent use.
type Layout struct {
	Name        string
	Description string
	Source      string // "built-in" or the file it was read from
	// VLLMVersion is the release a generated file was made from; for built-ins, the
	// version the mock engine reports (empty when engines of the layout report none).
	VLLMVersion string
	// Versions is the range of reported vllm_version values placed on this layout;
	// zero for layouts whose engines report no version.
	Versions VersionRange
	// RegistrationEmpty: engines send an empty input-socket registration frame.
	// Otherwise Registration is the exact key set of its map, in vLLM's order.
	RegistrationEmpty bool
	Registration      []string
	// ReadyRequired and ReadyAbsent are keys READY must and must not carry.
	ReadyRequired, ReadyAbsent []string
	// ProbeHas and ProbeLacks are EngineCore methods an engine of this layout has and
	// lacks: asked with UTILITY probes when the handshake alone cannot tell layouts
	// apart (see Prober).
	ProbeHas, ProbeLacks []string
	// FinishReasons is how many FinishReason values the engine has (3: STOP, LENGTH,
	// ABORT; 4: + ERROR; 5: + REPETITION).
	FinishReasons   int
	SamplingKeys    []string
	Request         []Field
	RequestRequired int // leading request fields the engine requires
	Output          []Field
	LoRA            []Field // nil: unknown, requests with a LoRA are refused
	Pooling         []Field // PoolingParams; nil: unknown, pooling requests are refused
	// Native marks the layout switchyard's client protocol speaks: raw pass-through
	// values (mm_features, pooling_params, kv_hints) are sent only to its engines.
	Native bool

	req, out, lora []slot
	pooling        []slot // PoolingParams (pooling.go)
	poolHas        uint64 // 1<<poolField of every PoolingParams field present
	sampling       uint64 // samplingBit of every key the engine knows
	reqHas         uint64 // 1<<reqField of every request field present
	outHas         uint64
	eosInRequest   bool
	logprobsLists  int    // LogprobsLists' length: 3 before cu_num_generated_tokens, else 4
	prefillKeys    int    // PrefillStats keys written: 5 before num_cache_creation_tokens, else 6
	plainTail      []byte // an output entry's bytes after new_token_ids when nothing else is set
}

// slot is one position of a struct: what switchyard knows it as, and the default to
// write when it does not know it.
type slot struct {
	id  uint8
	def Raw
}

// LayoutError says a request uses something the target engine's layout has no place
// for; nothing was sent. Another engine, of another layout, may take it.
type LayoutError struct {
	Layout string
	Field  string
	Msg    string
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("wire: vLLM layout %s: %s: %s", e.Layout, e.Field, e.Msg)
}

// layoutFile is the JSON form of a layout, shared by the built-ins and the files
// `switchyard vllm-layout-script` generates.
type layoutFile struct {
	Format       int       `json:"format"`
	Name         string    `json:"name"`
	Description  string    `json:"description"`
	VLLMVersion  string    `json:"vllm_version"`
	Versions     string    `json:"versions"`     // ">=0.22.0,<0.27.0"; empty: from vllm_version's minor
	Registration *[]string `json:"registration"` // null: an empty frame
	Ready        struct {
		Required []string `json:"required"`
		Absent   []string `json:"absent"`
	} `json:"ready"`
	Probe struct {
		Has   []string `json:"has"`
		Lacks []string `json:"lacks"`
	} `json:"probe"`
	FinishReasons  []string                   `json:"finish_reasons"`
	SamplingParams []string                   `json:"sampling_params"`
	Structs        map[string]json.RawMessage `json:"structs"`
	Native         bool                       `json:"native"`
}

type structFile struct {
	Fields   []fieldFile `json:"fields"`
	Required *int        `json:"required"`
}

// fieldFile is a field as a bare name or {"name", "type", "default": hex msgpack}.
type fieldFile struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Default    string `json:"default"`
	HasDefault bool   `json:"-"`
}

func (f *fieldFile) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &f.Name)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	type plain fieldFile
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*f = fieldFile(p)
	_, f.HasDefault = m["default"]
	return nil
}

// ParseLayout reads a layout file. source names it in messages and in Layout.Source.
// Everything a codec needs is checked here, so a layout that loads can encode and
// decode: required fields switchyard cannot fill are refused now, not at the first
// request.
func ParseLayout(data []byte, source string) (*Layout, error) {
	var f layoutFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("vLLM layout %s: %w", source, err)
	}
	l, err := f.build(source)
	if err != nil {
		return nil, fmt.Errorf("vLLM layout %s: %w", source, err)
	}
	return l, nil
}

func (f *layoutFile) build(source string) (*Layout, error) {
	if f.Format != 1 {
		return nil, fmt.Errorf("format %d: this switchyard reads format 1", f.Format)
	}
	if f.Name == "" {
		return nil, errors.New("no name")
	}
	l := &Layout{
		Name: f.Name, Description: f.Description, Source: source, VLLMVersion: f.VLLMVersion,
		RegistrationEmpty: f.Registration == nil,
		ReadyRequired:     f.Ready.Required, ReadyAbsent: f.Ready.Absent,
		ProbeHas: f.Probe.Has, ProbeLacks: f.Probe.Lacks,
		SamplingKeys: f.SamplingParams, Native: f.Native,
	}
	if f.Registration != nil {
		l.Registration = slices.Clone(*f.Registration)
	}
	var err error
	switch {
	case f.Versions != "":
		l.Versions, err = ParseVersionRange(f.Versions)
	case f.VLLMVersion != "" && !l.RegistrationEmpty:
		// A generated file covers its own minor release: patch releases do not move
		// struct fields; a new minor may.
		var v Version
		if v, err = ParseVersion(f.VLLMVersion); err == nil {
			l.Versions = VersionRange{Min: Version{v[0], v[1], 0}, Max: Version{v[0], v[1] + 1, 0}}
		}
	}
	if err != nil {
		return nil, err
	}
	// The reasons switchyard knows must keep their values; a release may add more
	// after them (decoded as they come, never sent by the mock engine).
	known := [...]string{"STOP", "LENGTH", "ABORT", "ERROR", "REPETITION"}
	for i, r := range f.FinishReasons {
		if i < len(known) && !strings.EqualFold(r, known[i]) {
			return nil, fmt.Errorf("finish_reasons: %q at %d: expected STOP, LENGTH, ABORT, ERROR, REPETITION in that order", r, i)
		}
	}
	l.FinishReasons = len(f.FinishReasons)
	if l.FinishReasons < 3 {
		return nil, errors.New("finish_reasons: STOP, LENGTH and ABORT are needed")
	}
	for _, k := range f.SamplingParams {
		l.sampling |= samplingBit(k)
	}
	if l.Native {
		// The native layout passes a client's unknown keys through to Validate,
		// which refuses them with its own message.
		l.sampling |= samplingUnknownBit
	}
	if l.sampling&samplingBit("max_tokens") == 0 {
		return nil, errors.New("sampling_params: no max_tokens")
	}
	if err := l.buildRequest(f); err != nil {
		return nil, err
	}
	if err := l.buildOutput(f); err != nil {
		return nil, err
	}
	// Two small structs whose length changed: written per layout, read leniently.
	if l.logprobsLists, err = f.fieldCount("LogprobsLists", 4, 3); err != nil {
		return nil, err
	}
	if l.prefillKeys, err = f.fieldCount("PrefillStats", 6, 5); err != nil {
		return nil, err
	}
	l.buildPlainTail()
	if raw, ok := f.Structs["LoRARequest"]; ok {
		var s structFile
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("LoRARequest: %w", err)
		}
		l.LoRA, l.lora, err = slots(s.Fields, loraFieldIDs, "LoRARequest")
		if err != nil {
			return nil, err
		}
	}
	if raw, ok := f.Structs["PoolingParams"]; ok {
		var s structFile
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("PoolingParams: %w", err)
		}
		if l.Pooling, l.pooling, err = slots(s.Fields, poolingFieldIDs, "PoolingParams"); err != nil {
			return nil, err
		}
		for _, sl := range l.pooling {
			l.poolHas |= 1 << sl.id
		}
	}
	return l, nil
}

func (l *Layout) buildRequest(f *layoutFile) error {
	s, err := structOf(f, "EngineCoreRequest")
	if err != nil {
		return err
	}
	if l.Request, l.req, err = slots(s.Fields, requestFieldIDs, "EngineCoreRequest"); err != nil {
		return err
	}
	for i, sl := range l.req {
		l.reqHas |= 1 << sl.id
		if sl.id == reqUnknown && l.Request[i].Default == nil {
			return fmt.Errorf("EngineCoreRequest.%s: required, and unknown to this switchyard: it cannot build requests for this layout", l.Request[i].Name)
		}
	}
	for _, id := range []uint8{reqRequestID, reqPromptTokenIDs, reqSampling, reqArrivalTime} {
		if l.reqHas&(1<<id) == 0 {
			return fmt.Errorf("EngineCoreRequest has no %s", requestFieldNames[id])
		}
	}
	l.eosInRequest = l.reqHas&(1<<reqEOSTokenID) != 0
	if !l.eosInRequest && l.sampling&samplingBit("_eos_token_id") == 0 {
		return errors.New("no place for the EOS id: neither EngineCoreRequest.eos_token_id nor SamplingParams._eos_token_id")
	}
	l.RequestRequired = len(l.req)
	if s.Required != nil {
		l.RequestRequired = *s.Required
	} else {
		for i, fl := range l.Request {
			if fl.Default != nil {
				l.RequestRequired = i
				break
			}
		}
	}
	return nil
}

func (l *Layout) buildOutput(f *layoutFile) error {
	s, err := structOf(f, "EngineCoreOutput")
	if err != nil {
		return err
	}
	if l.Output, l.out, err = slots(s.Fields, outputFieldIDs, "EngineCoreOutput"); err != nil {
		return err
	}
	for _, sl := range l.out {
		l.outHas |= 1 << sl.id
	}
	for _, id := range []uint8{outRequestID, outNewTokenIDs, outFinishReason} {
		if l.outHas&(1<<id) == 0 {
			return fmt.Errorf("EngineCoreOutput has no %s", outputFieldNames[id])
		}
	}
	if l.out[0].id != outRequestID || l.out[1].id != outNewTokenIDs {
		return errors.New("EngineCoreOutput must start with request_id, new_token_ids")
	}
	if o, err := structOf(f, "EngineCoreOutputs"); err == nil {
		// The envelope never changed; a layout that says otherwise is one this
		// switchyard cannot decode.
		var names []string
		for _, fl := range o.Fields {
			names = append(names, fl.Name)
		}
		if !slices.Equal(names, outputsFieldNames[:]) {
			return fmt.Errorf("EngineCoreOutputs is %v; this switchyard knows only %v", names, outputsFieldNames)
		}
	}
	return nil
}

// fieldCount is how many fields struct name has in f: def when f does not say, else
// one of def and alt.
func (f *layoutFile) fieldCount(name string, def, alt int) (int, error) {
	raw, ok := f.Structs[name]
	if !ok {
		return def, nil
	}
	var s structFile
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if n := len(s.Fields); n != def && n != alt {
		return 0, fmt.Errorf("%s: %d fields; this switchyard knows %d or %d", name, n, alt, def)
	}
	return len(s.Fields), nil
}

func structOf(f *layoutFile, name string) (structFile, error) {
	var s structFile
	raw, ok := f.Structs[name]
	if !ok {
		return s, fmt.Errorf("no %s in structs", name)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if len(s.Fields) == 0 {
		return s, fmt.Errorf("%s: no fields", name)
	}
	if len(s.Fields) > 60 {
		return s, fmt.Errorf("%s: %d fields; at most 60", name, len(s.Fields))
	}
	return s, nil
}

// slots maps each field name to switchyard's id for it (the unknown id, 0, for
// names it does not know) and decodes the defaults.
func slots(ff []fieldFile, ids map[string]uint8, typ string) ([]Field, []slot, error) {
	fields := make([]Field, len(ff))
	out := make([]slot, len(ff))
	seen := map[string]bool{}
	for i, f := range ff {
		if f.Name == "" || seen[f.Name] {
			return nil, nil, fmt.Errorf("%s: field %d: empty or repeated name %q", typ, i, f.Name)
		}
		seen[f.Name] = true
		fields[i] = Field{Name: f.Name, Type: f.Type}
		if f.HasDefault {
			d, err := hex.DecodeString(f.Default)
			if err != nil || !validRaw(d) {
				return nil, nil, fmt.Errorf("%s.%s: default is not one msgpack value in hex", typ, f.Name)
			}
			fields[i].Default = d
		}
		out[i] = slot{id: ids[f.Name], def: fields[i].Default}
		if out[i].def == nil {
			out[i].def = Raw{0xc0}
		}
	}
	return fields, out, nil
}

// firstBitName names the lowest set bit of m among names (bit i = names[i]).
func firstBitName(m uint64, names []string) string {
	i := bits.TrailingZeros64(m)
	if i < len(names) {
		return names[i]
	}
	return "?"
}
