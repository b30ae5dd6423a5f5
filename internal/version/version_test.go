package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

func TestGet(t *testing.T) {
	in := Get()
	if in.GoVersion != runtime.Version() || in.Version == "" {
		t.Fatalf("Get() = %+v", in)
	}
	names := wire.LayoutNames()
	if len(in.Layouts) != len(names) {
		t.Fatalf("layouts %v, want %v", in.Layouts, names)
	}
	for i, l := range in.Layouts {
		if l.Name != names[i] || l.Versions == "" {
			t.Errorf("layout %d = %+v, want name %s and a version range", i, l, names[i])
		}
	}
	s := in.String()
	for _, want := range append([]string{"switchyard ", runtime.Version()}, names...) {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}
