package wire

import (
	"embed"
	"fmt"
	"slices"
	"strings"
)

// The built-in layouts: one per vLLM wire layout the golden fixtures prove
// (testdata/vllm-versions, made with each release's own classes). Their JSON is the
// same format an operator's generated file has.
//
//go:embed layouts/*.json
var builtinFS embed.FS

// builtinOrder is oldest first; it is also the order layouts are listed in.
var builtinOrder = []string{"v0.11", "v0.12", "v0.15", "v0.18", "v0.21", "newest"}

var builtins = func() []*Layout {
	out := make([]*Layout, 0, len(builtinOrder))
	for _, name := range builtinOrder {
		data, err := builtinFS.ReadFile("layouts/" + name + ".json")
		if err != nil {
			panic(err)
		}
		l, err := ParseLayout(data, "built-in")
		if err != nil {
			panic(err) // a broken built-in is a build bug; TestBuiltinLayouts names it
		}
		out = append(out, l)
	}
	return out
}()

// Native is the layout switchyard's own client protocol speaks (the newest vLLM
// layout); package-level AppendAdd, DecodeAdd, AppendOutputs and a zero
// OutputsDecoder use it.
func Native() *Layout { return builtins[len(builtins)-1] }

// BuiltinLayouts lists the built-in layouts, oldest first.
func BuiltinLayouts() []*Layout { return slices.Clone(builtins) }

// BuiltinLayout returns the built-in layout called name ("v0.18", "newest"; a leading
// "v" and a trailing ".0" are optional), or nil.
func BuiltinLayout(name string) *Layout {
	for _, l := range builtins {
		if l.Name == name || strings.TrimPrefix(l.Name, "v") == strings.TrimSuffix(strings.TrimPrefix(name, "v"), ".0") {
			return l
		}
	}
	return nil
}

// LayoutNames lists the built-in layouts' names.
func LayoutNames() []string {
	names := make([]string, len(builtins))
	for i, l := range builtins {
		names[i] = l.Name
	}
	return names
}

// String is the layout's name and where it came from.
func (l *Layout) String() string {
	if l.Source == "built-in" {
		return l.Name
	}
	return fmt.Sprintf("%s (%s)", l.Name, l.Source)
}

// EOSInRequest reports layouts that carry the EOS id at EngineCoreRequest.eos_token_id
// (releases before v0.18) rather than in SamplingParams._eos_token_id.
func (l *Layout) EOSInRequest() bool { return l.eosInRequest }

// KnowsSampling reports whether the engine knows SamplingParams key k.
func (l *Layout) KnowsSampling(k string) bool { return slices.Contains(l.SamplingKeys, k) }
