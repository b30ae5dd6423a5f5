package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// decodeAny decodes JSON keeping integers as int64 (as Python's json.loads
// does); objects become map[string]any, which loses key order: the plain Go
// shape a caller of a map-based engine hands it.
func decodeAny(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}

// strftime formats t for the directives the templates and snippets use, as
// Python's time.strftime does on glibc.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		c := f[i]
		if c == '-' && i+1 < len(f) {
			i++
			switch f[i] {
			case 'd':
				fmt.Fprint(&b, t.Day())
			case 'm':
				fmt.Fprint(&b, int(t.Month()))
			}
			continue
		}
		b.WriteString(directive(t, c))
	}
	return b.String()
}

func directive(t time.Time, c byte) string {
	switch c {
	case 'Y':
		return t.Format("2006")
	case 'y':
		return t.Format("06")
	case 'm':
		return t.Format("01")
	case 'd':
		return t.Format("02")
	case 'e':
		return t.Format("_2")
	case 'H':
		return t.Format("15")
	case 'I':
		return t.Format("03")
	case 'p':
		return t.Format("PM")
	case 'M':
		return t.Format("04")
	case 'S':
		return t.Format("05")
	case 'a':
		return t.Format("Mon")
	case 'A':
		return t.Format("Monday")
	case 'b':
		return t.Format("Jan")
	case 'B':
		return t.Format("January")
	case 'j':
		return fmt.Sprintf("%03d", t.YearDay())
	case 'u':
		return fmt.Sprint((int(t.Weekday())+6)%7 + 1)
	case 'w':
		return fmt.Sprint(int(t.Weekday()))
	case 'F':
		return t.Format("2006-01-02")
	case 'T':
		return t.Format("15:04:05")
	case 'D':
		return t.Format("01/02/06")
	case '%':
		return "%"
	}
	return "%" + string(c)
}
