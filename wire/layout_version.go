package wire

// vLLM release numbers and ranges, which place an engine that reports its version
// on a layout.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Version is a vLLM release number (major, minor, patch); development builds such as
// 0.26.1.dev42+g48c3294 count as their base release.
type Version [3]int

// ParseVersion reads "0.18.1", "v0.18", "0.26.1.dev42+g48c3294", "0.19.0rc1".
func ParseVersion(s string) (Version, error) {
	var v Version
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(t, "+-"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	n := 0
	for _, p := range parts {
		if n == 3 {
			break
		}
		// "1rc1", "dev42": the digits that start the part, if any.
		d := 0
		for d < len(p) && p[d] >= '0' && p[d] <= '9' {
			d++
		}
		if d == 0 {
			break
		}
		x, err := strconv.Atoi(p[:d])
		if err != nil || x > 1<<20 {
			return v, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		v[n] = x
		n++
		if d < len(p) {
			break // a pre-release or dev suffix ends the release number
		}
	}
	if n < 2 {
		return v, fmt.Errorf("version %q: expected MAJOR.MINOR[.PATCH]", s)
	}
	return v, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Compare returns -1, 0 or 1.
func (v Version) Compare(w Version) int { return slices.Compare(v[:], w[:]) }

// VersionRange is Min <= v < Max; a zero Max has no upper bound. The zero range
// holds nothing.
type VersionRange struct{ Min, Max Version }

// ParseVersionRange reads ">=0.22.0,<0.27.0" (either bound may be left out, not both).
func ParseVersionRange(s string) (VersionRange, error) {
	var r VersionRange
	var lo, hi bool
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		var err error
		switch {
		case strings.HasPrefix(p, ">="):
			r.Min, err = ParseVersion(p[2:])
			lo = true
		case strings.HasPrefix(p, "<"):
			r.Max, err = ParseVersion(p[1:])
			hi = true
		default:
			err = fmt.Errorf("versions %q: each bound is >=X.Y.Z or <X.Y.Z", s)
		}
		if err != nil {
			return r, err
		}
	}
	if !lo && !hi {
		return r, fmt.Errorf("versions %q: no bound", s)
	}
	if hi && r.Max.Compare(r.Min) <= 0 {
		return r, fmt.Errorf("versions %q: empty range", s)
	}
	return r, nil
}

// IsZero reports a range that holds nothing (layouts whose engines report no version).
func (r VersionRange) IsZero() bool { return r == VersionRange{} }

// Contains reports Min <= v < Max.
func (r VersionRange) Contains(v Version) bool {
	if r.IsZero() || v.Compare(r.Min) < 0 {
		return false
	}
	return r.Max == Version{} || v.Compare(r.Max) < 0
}

func (r VersionRange) String() string {
	switch {
	case r.IsZero():
		return "(reports no version)"
	case r.Max == Version{}:
		return ">=" + r.Min.String()
	}
	return ">=" + r.Min.String() + ",<" + r.Max.String()
}
