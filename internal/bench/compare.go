package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Change is one figure of two runs.
type Change struct {
	Figure string
	A, B   float64
	InA    bool
	InB    bool
	// Percent is (B-A)/A*100; NaN when A is 0 or the figure is missing from one side.
	Percent float64
	// Verdict is "better", "worse" or "" (no direction known, or no change).
	Verdict string
}

// Compare lists every numeric figure of a and b by its JSON path (for example
// "switchyard.dispatch.p99_us" or "overhead_ratio.p50"). It works on the JSON form, so
// a figure added in a later schema shows up as present on one side only instead of
// breaking the comparison. CDF points and the configuration's raw fields are skipped:
// the percentiles already summarise the former, and ConfigDiff covers the latter.
func Compare(a, b *Report) ([]Change, error) {
	fa, err := flatten(a)
	if err != nil {
		return nil, err
	}
	fb, err := flatten(b)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(fa)+len(fb))
	for k := range fa {
		keys = append(keys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]Change, 0, len(keys))
	for _, k := range keys {
		if strings.HasPrefix(k, "config.") || strings.HasPrefix(k, "machine.") {
			continue
		}
		va, inA := fa[k]
		vb, inB := fb[k]
		c := Change{Figure: k, A: va, B: vb, InA: inA, InB: inB, Percent: math.NaN()}
		if inA && inB && va != 0 {
			c.Percent = (vb - va) / math.Abs(va) * 100
		}
		if inA && inB && va != vb {
			c.Verdict = verdict(k, vb > va)
		}
		out = append(out, c)
	}
	return out, nil
}

// ConfigDiff lists the configuration and machine fields that differ: a comparison
// between runs of different shape or on different machines says little.
func ConfigDiff(a, b *Report) []string {
	ja, _ := json.Marshal(struct {
		C Config  `json:"config"`
		M Machine `json:"machine"`
	}{a.Config, a.Machine})
	jb, _ := json.Marshal(struct {
		C Config  `json:"config"`
		M Machine `json:"machine"`
	}{b.Config, b.Machine})
	var ma, mb map[string]any
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	fa, fb := map[string]string{}, map[string]string{}
	flattenAny("", ma, func(k string, v any) { fa[k] = fmt.Sprint(v) })
	flattenAny("", mb, func(k string, v any) { fb[k] = fmt.Sprint(v) })
	var diffs []string
	for k, va := range fa {
		if vb, ok := fb[k]; !ok || va != vb {
			diffs = append(diffs, fmt.Sprintf("%s: %s -> %s", k, va, fb[k]))
		}
	}
	for k, vb := range fb {
		if _, ok := fa[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: (absent) -> %s", k, vb))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// verdict says whether a rise of figure k is good. Throughput is better up; latency,
// CPU, memory, allocations, failures and ratios are better down.
func verdict(k string, rose bool) string {
	var higherIsBetter bool
	switch {
	case strings.HasSuffix(k, "_per_s"), strings.HasSuffix(k, ".requests"), strings.HasSuffix(k, ".met"),
		strings.HasSuffix(k, ".hit_ratio"), strings.HasSuffix(k, ".hit_tokens"):
		higherIsBetter = true
	case strings.HasSuffix(k, "_us"), strings.HasSuffix(k, "_ms"), strings.HasSuffix(k, ".max_over_mean"), strings.Contains(k, "ratio"), strings.Contains(k, "bytes"),
		strings.Contains(k, "allocs"), strings.Contains(k, "cpu_s"), strings.HasSuffix(k, ".failed"),
		strings.HasSuffix(k, ".unmatched"), strings.HasSuffix(k, ".clamped"):
		higherIsBetter = false
	default:
		return ""
	}
	if rose == higherIsBetter {
		return "better"
	}
	return "worse"
}

func flatten(r *Report) (map[string]float64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("bench: compare: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("bench: compare: %w", err)
	}
	out := map[string]float64{}
	flattenAny("", m, func(k string, v any) {
		switch x := v.(type) {
		case float64:
			out[k] = x
		case bool:
			if x {
				out[k] = 1
			} else {
				out[k] = 0
			}
		}
	})
	return out, nil
}

// flattenAny walks decoded JSON, naming leaves by dotted path; arrays of objects are
// indexed by position ("sweep.0.offered_rate"), except the CDFs.
func flattenAny(prefix string, v any, leaf func(string, any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			if k == "cdf" {
				continue
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flattenAny(p, vv, leaf)
		}
	case []any:
		for i, vv := range x {
			flattenAny(fmt.Sprintf("%s.%d", prefix, i), vv, leaf)
		}
	default:
		leaf(prefix, v)
	}
}

// PrintCompare writes the comparison of a and b as a table: the configuration
// differences first, then every figure that changed (all of them when all is set).
func PrintCompare(w io.Writer, nameA, nameB string, a, b *Report, all bool) error {
	changes, err := Compare(a, b)
	if err != nil {
		return err
	}
	if d := ConfigDiff(a, b); len(d) > 0 {
		fmt.Fprintln(w, "configuration or machine differ (figures may not be comparable):")
		for _, line := range d {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\t%s\t%s\tchange\t\t\n", nameA, nameB)
	for _, c := range changes {
		if !all && c.InA && c.InB && c.A == c.B {
			continue
		}
		pct := "n/a"
		switch {
		case !c.InA:
			pct = "new"
		case !c.InB:
			pct = "gone"
		case !math.IsNaN(c.Percent):
			pct = fmt.Sprintf("%+.1f%%", c.Percent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", c.Figure, num(c.A, c.InA), num(c.B, c.InB), pct, c.Verdict)
	}
	return tw.Flush()
}

func num(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return FormatFigure(v)
}

// FormatFigure prints a figure with the precision its size deserves.
func FormatFigure(v float64) string {
	switch a := math.Abs(v); {
	case a == math.Trunc(a) && a < 1e15:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// FormatRate writes a rate with thousands separators: 5,000.
func FormatRate(x float64) string {
	if x != math.Trunc(x) || x >= 1e15 {
		return fmt.Sprintf("%g", x)
	}
	s := fmt.Sprintf("%d", int64(x))
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
