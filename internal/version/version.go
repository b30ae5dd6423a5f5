// Package version says what this binary is: its module version, the VCS commit it
// was built from, the Go version, and the vLLM wire layouts it speaks. `switchyard
// --version` prints it and `GET /version` serves it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/switchyard-llm/switchyard/wire"
)

// Info is the build's identity. JSON field names are what GET /version answers.
type Info struct {
	// Version is the main module's version ("(devel)" for a build from a checkout).
	Version string `json:"version"`
	// Commit is vcs.revision from the build info, empty when built without VCS
	// stamping (-buildvcs=false); Modified is vcs.modified.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Layouts are the built-in vLLM wire layouts, oldest first.
	Layouts []Layout `json:"vllm_layouts"`
}

// Layout is one built-in wire layout and the vLLM versions it covers.
type Layout struct {
	Name string `json:"name"`
	// Versions is the range of reported vllm_version values placed on it;
	// "(reports no version)" for older releases, recognised by probing instead.
	Versions string `json:"vllm_versions"`
	// Description names the releases it covers, reported version or not.
	Description string `json:"description"`
}

// Get reads the build info of the running binary.
func Get() Info {
	in := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	for _, l := range wire.BuiltinLayouts() {
		in.Layouts = append(in.Layouts, Layout{Name: l.Name, Versions: l.Versions.String(), Description: l.Description})
	}
	return in
}

// String is the human form `switchyard --version` prints.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "switchyard %s", in.Version)
	if in.Commit != "" {
		fmt.Fprintf(&b, " (commit %s", in.Commit)
		if in.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, "\n%s\nvLLM wire layouts:\n", in.GoVersion)
	for _, l := range in.Layouts {
		fmt.Fprintf(&b, "  %-8s %s", l.Name, l.Description)
		if strings.HasPrefix(l.Versions, ">=") {
			fmt.Fprintf(&b, "; vllm_version %s", l.Versions)
		} else {
			b.WriteString("; no vllm_version reported, recognised by probing")
		}
		b.WriteString("\n")
	}
	return b.String()
}
