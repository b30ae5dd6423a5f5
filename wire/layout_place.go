package wire

// Placing an engine on a layout. Nothing in the protocol names the layout, so it is
// told from what the handshake shows (the registration frame's shape and reported
// vllm_version, READY's keys) and, where that leaves several candidates, from UTILITY
// probes. A layout that cannot be placed is refused, never guessed: a wrongly laid
// out ADD kills an engine's input thread without a word. Everything here is plain
// logic on values; the frontend does the IO.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// LayoutSet is what engines may be placed on: the operator's layout files (tried
// first, in order), then the built-ins. Force, when set, is used for every engine
// that reports no version, and for versions nothing else places.
type LayoutSet struct {
	Files []*Layout
	Force *Layout
}

// all lists the operator's layouts, then the built-ins.
func (s *LayoutSet) all() []*Layout {
	if s == nil {
		return builtins
	}
	return append(slices.Clip(s.Files), builtins...)
}

// maxVersionLen bounds the reported vllm_version kept for messages and labels.
const maxVersionLen = 64

// Placement is the outcome of Place: exactly one of Layout (placed), Candidates
// (probe them: NewProber) or Refused (a message for the log and /v1/engines).
type Placement struct {
	Layout     *Layout
	How        string // how it was placed, for the log
	Candidates []*Layout
	Refused    string
	Version    string // the vllm_version the engine reported, if any
	// ExtraKeys are the registration keys the layout does not list, when it was
	// placed by knownExtras (for the log, once per engine).
	ExtraKeys []string
}

// Place decides from the handshake. ready is READY's message, nil when a launcher
// did the handshake (bootstrapped engines): its keys are not checked then.
func (s *LayoutSet) Place(reg *ReadyResponse, ready *HandshakeStatus) Placement {
	var p Placement
	if reg.VLLMVersion.Valid {
		// It ends up in logs, /v1/engines and a metric label: an engine does not get
		// to make those large.
		p.Version = reg.VLLMVersion.Value
		if len(p.Version) > maxVersionLen {
			p.Version = strings.ToValidUTF8(p.Version[:maxVersionLen], "") + "..."
		}
	}
	shape := registrationShape(reg)
	if p.Version != "" {
		v, err := ParseVersion(p.Version)
		if err == nil {
			for _, l := range s.all() {
				if l.Versions.Contains(v) && l.shapeMatches(reg) && l.readyMatches(ready) {
					p.Layout, p.How = l, "vllm_version "+p.Version+" in "+l.Versions.String()+" with a matching registration"
					return p
				}
			}
			if l, extra := s.placeWithExtras(v, reg, ready); l != nil {
				p.Layout, p.ExtraKeys = l, extra
				p.How = "vllm_version " + p.Version + " in " + l.Versions.String() + " with a registration that adds keys switchyard knows [" + keyList(extra) + "]"
				return p
			}
		}
		if s != nil && s.Force != nil {
			p.Layout, p.How = s.Force, "forced by --vllm-layout (the reported vllm_version "+p.Version+" is not placed by any layout)"
			return p
		}
		why := "no layout covers vLLM " + p.Version + " with a registration of " + shape
		if err != nil {
			why = "its vllm_version " + strconv.Quote(p.Version) + " cannot be read (" + err.Error() + ")"
		}
		p.Refused = s.Refusal(why)
		return p
	}
	if s != nil && s.Force != nil {
		p.Layout, p.How = s.Force, "forced by --vllm-layout (the engine reports no version)"
		return p
	}
	for _, l := range s.all() {
		if l.Versions.IsZero() && l.shapeMatches(reg) && l.readyMatches(ready) {
			if l.Source != "built-in" {
				// The operator's file for version-less engines decides alone.
				p.Layout, p.How = l, "layout file "+l.Source+" for engines with a registration of "+shape
				return p
			}
			p.Candidates = append(p.Candidates, l)
		}
	}
	switch len(p.Candidates) {
	case 0:
		p.Refused = s.Refusal("no layout has a registration of " + shape + readyDesc(ready))
	case 1:
		p.Layout, p.How, p.Candidates = p.Candidates[0], "registration of "+shape+readyDesc(ready), nil
	}
	return p
}

// placeWithExtras is the second pass for a version no layout places exactly: a
// layout whose range holds v and whose registration keys reg carries, with the rest
// of reg's keys ones switchyard's own decoder reads (a release between the built-ins
// that registers more, such as the coordinator addresses). Extra registration keys
// are only read at the handshake, never written to the engine, so they cannot
// change a request's layout; a missing key can (it marks an older shape) and is
// still refused.
func (s *LayoutSet) placeWithExtras(v Version, reg *ReadyResponse, ready *HandshakeStatus) (*Layout, []string) {
	if reg.Empty {
		return nil, nil
	}
	for _, l := range s.all() {
		if l.RegistrationEmpty || !l.Versions.Contains(v) || !l.readyMatches(ready) {
			continue
		}
		if extra, ok := l.knownExtras(reg); ok {
			return l, extra
		}
	}
	return nil, nil
}

// knownExtras returns reg's keys l does not list; ok is false when reg lacks one of
// l's keys or carries a key switchyard's decoder does not know.
func (l *Layout) knownExtras(reg *ReadyResponse) (extra []string, ok bool) {
	for _, k := range l.Registration {
		if !slices.Contains(reg.Keys, k) {
			return nil, false
		}
	}
	for _, k := range reg.Keys {
		if slices.Contains(l.Registration, k) {
			continue
		}
		if !slices.Contains(readyKeyNames[:], k) {
			return nil, false
		}
		extra = append(extra, k)
	}
	return extra, true
}

// Refusal words why an engine cannot be placed, with what can be done about it.
func (s *LayoutSet) Refusal(why string) string {
	var known []string
	for _, l := range s.all() {
		desc := l.Name + " (" + l.Versions.String() + ")"
		if l.Versions.IsZero() {
			desc = l.Name
		}
		known = append(known, desc)
	}
	return "the engine's wire layout cannot be placed: " + why + "; known layouts: " + strings.Join(known, ", ") +
		". Either generate a layout file on the engine host (switchyard vllm-layout-script | python3 - > layout.json) and pass it with --vllm-layout layout.json, or force a known layout with --vllm-layout NAME"
}

func registrationShape(reg *ReadyResponse) string {
	if reg.Empty {
		return "an empty frame"
	}
	return strconv.Itoa(len(reg.Keys)) + " keys [" + keyList(reg.Keys) + "]"
}

// keyList joins the first keys for a message, each cut short: an engine's keys are
// its to choose.
func keyList(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i == 32 {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if len(k) > 64 {
			k = strings.ToValidUTF8(k[:64], "") + "..."
		}
		b.WriteString(k)
	}
	return b.String()
}

func readyDesc(ready *HandshakeStatus) string {
	if ready == nil {
		return ""
	}
	return " and READY keys [" + keyList(ready.Keys) + "]"
}

// shapeMatches: an empty frame for empty-registration layouts, else exactly the
// layout's key set (order aside).
func (l *Layout) shapeMatches(reg *ReadyResponse) bool {
	if l.RegistrationEmpty || reg.Empty {
		return l.RegistrationEmpty && reg.Empty
	}
	if len(reg.Keys) != len(l.Registration) {
		return false
	}
	for _, k := range reg.Keys {
		if !slices.Contains(l.Registration, k) {
			return false
		}
	}
	return true
}

// readyMatches: READY carries every required key and none of the absent ones.
func (l *Layout) readyMatches(ready *HandshakeStatus) bool {
	if ready == nil {
		return true
	}
	for _, k := range l.ReadyRequired {
		if !slices.Contains(ready.Keys, k) {
			return false
		}
	}
	for _, k := range l.ReadyAbsent {
		if slices.Contains(ready.Keys, k) {
			return false
		}
	}
	return true
}

// ProbeArgs is how many arguments a probe passes: more than any EngineCore method
// takes, so the call fails in vLLM's argument check (an assert in
// _convert_msgspec_args, or Python's own TypeError) before the method's body runs,
// while a method the engine lacks fails in getattr with "has no attribute". Either
// way nothing runs: the probe only asks whether the name exists.
const ProbeArgs = 64

// ProbeArgsRaw is the probe's argument list: ProbeArgs nils, as raw msgpack.
var ProbeArgsRaw = func() Raw {
	b := appendArrayHeader(nil, ProbeArgs)
	for range ProbeArgs {
		b = appendNil(b)
	}
	return b
}()

// ProbeAnswer reads a probe's UtilityOutput: whether the engine has the method. A
// failure that says "has no attribute" means it does not; any other failure (the
// argument check) means it does. A success cannot happen with ProbeArgs arguments;
// it is taken as "has" all the same.
func ProbeAnswer(method string, u *UtilityOutput) bool {
	if !u.Failure.Valid {
		return true
	}
	return !strings.Contains(u.Failure.Value, "has no attribute '"+method+"'")
}

// Prober tells candidate layouts apart by the EngineCore methods their engines have.
// Candidates are tried newest first (methods are added release by release): each is
// confirmed by asking its ProbeHas and ProbeLacks methods; answers are kept, so a
// method is asked at most once. It is a plain value; the caller sends each Next
// method as a UTILITY call and feeds the reply to Answer.
type Prober struct {
	cands   []*Layout // newest first
	answers map[string]bool
	asked   []string
}

// maxProbes bounds the calls one engine is asked (each logs an exception in the
// engine, which is noise, not harm).
const maxProbes = 8

// NewProber starts telling cands apart.
func NewProber(cands []*Layout) *Prober {
	c := slices.Clone(cands)
	slices.Reverse(c) // Place lists oldest first
	return &Prober{cands: c, answers: map[string]bool{}}
}

// Next is the next method to ask; ok is false once Result can answer.
func (p *Prober) Next() (method string, ok bool) {
	if len(p.asked) >= maxProbes {
		return "", false
	}
	for _, l := range p.cands {
		m, consistent := p.pending(l)
		if !consistent {
			continue
		}
		if m == "" {
			return "", false // l is confirmed
		}
		return m, true
	}
	return "", false
}

// pending returns l's first unanswered method, or "" when every one is answered;
// consistent is false once an answer contradicts l.
func (p *Prober) pending(l *Layout) (method string, consistent bool) {
	for _, set := range [2]struct {
		names []string
		want  bool
	}{{l.ProbeHas, true}, {l.ProbeLacks, false}} {
		for _, m := range set.names {
			has, ok := p.answers[m]
			if !ok {
				if method == "" {
					method = m
				}
				continue
			}
			if has != set.want {
				return "", false
			}
		}
	}
	return method, true
}

// Answer records whether the engine has method.
func (p *Prober) Answer(method string, has bool) {
	p.answers[method] = has
	p.asked = append(p.asked, method)
}

// Result is the placed layout, or an error naming what the engine answered.
func (p *Prober) Result() (*Layout, string) {
	for _, l := range p.cands {
		if m, consistent := p.pending(l); consistent && m == "" && len(l.ProbeHas)+len(l.ProbeLacks) > 0 {
			return l, "UTILITY probes (" + p.describe() + ")"
		}
	}
	return nil, "its EngineCore methods (" + p.describe() + ") match none of the candidate layouts"
}

func (p *Prober) describe() string {
	var parts []string
	for _, m := range p.asked {
		if p.answers[m] {
			parts = append(parts, "has "+m)
		} else {
			parts = append(parts, "lacks "+m)
		}
	}
	return strings.Join(parts, ", ")
}

// LayoutMismatchError fails an engine whose first outputs do not fit the layout it
// was placed on: before any client sees what the engine sent.
type LayoutMismatchError struct {
	Layout string
	Msg    string
}

func (e *LayoutMismatchError) Error() string {
	return fmt.Sprintf("wire: the engine's outputs do not match vLLM layout %s: %s", e.Layout, e.Msg)
}
