package chattemplate

import (
	"fmt"
	"strings"
	"time"
)

// maxRange is jinja2's sandbox MAX_RANGE.
const maxRange = 100000

// globals are the names every template sees: jinja2's defaults that chat
// templates use, plus transformers' raise_exception and strftime_now.
var globals map[string]any

func init() {
	globals = map[string]any{
		"raise_exception": builtin(func(_ *renderer, args []any, _ map[string]any) (any, error) {
			msg := ""
			if len(args) > 0 {
				msg = str(args[0])
			}
			return nil, &RaisedError{Message: msg}
		}),
		"strftime_now": builtin(func(r *renderer, args []any, _ map[string]any) (any, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("strftime_now() takes exactly one argument")
			}
			f, ok := args[0].(string)
			if !ok {
				return nil, fmt.Errorf("strftime() argument 1 must be str, not %s", typeName(args[0]))
			}
			return strftime(r.now(), f)
		}),
		"range": builtin(func(r *renderer, args []any, _ map[string]any) (any, error) {
			var a [3]int
			a[2] = 1
			for i, v := range args {
				n, ok := toInt(v)
				if !ok || i > 2 {
					return nil, fmt.Errorf("range() arguments must be integers")
				}
				a[i] = n
			}
			switch len(args) {
			case 0:
				return nil, fmt.Errorf("range expected at least 1 argument, got 0")
			case 1:
				a[0], a[1] = 0, a[0]
			}
			if a[2] == 0 {
				return nil, fmt.Errorf("range() arg 3 must not be zero")
			}
			if n := rangeLen(a); n > maxRange {
				return nil, fmt.Errorf("range too big: the sandbox blocks ranges larger than MAX_RANGE (%d)", maxRange)
			} else if err := r.alloc(n * elemBytes); err != nil {
				return nil, err
			} else if err := r.spend(int(n)); err != nil { // an element is a step to build
				return nil, err
			}
			out := make([]any, 0, rangeLen(a))
			for i := a[0]; (a[2] > 0 && i < a[1]) || (a[2] < 0 && i > a[1]); i += a[2] {
				if len(out) >= maxRange {
					return nil, fmt.Errorf("range too big: the sandbox blocks ranges larger than MAX_RANGE (%d)", maxRange)
				}
				out = append(out, int64(i))
			}
			return &pyRange{items: out, args: a, n: len(args)}, nil
		}),
		"namespace": builtin(func(_ *renderer, args []any, kw map[string]any) (any, error) {
			ns := &namespace{obj: NewObject()}
			for _, a := range args {
				keys, ok := dictKeys(normalize(a))
				if !ok {
					return nil, fmt.Errorf("namespace() positional argument must be a mapping")
				}
				for _, k := range keys {
					v, _ := dictGet(normalize(a), k)
					ns.obj.Set(k, v)
				}
			}
			for _, k := range sortedKeys(kw) {
				ns.obj.Set(k, kw[k])
			}
			return ns, nil
		}),
		"dict": builtin(func(_ *renderer, args []any, kw map[string]any) (any, error) {
			o := NewObject()
			if len(args) > 0 {
				return nil, fmt.Errorf("unsupported: dict() with positional arguments")
			}
			for _, k := range sortedKeys(kw) {
				o.Set(k, kw[k])
			}
			return o, nil
		}),
	}
}

var (
	longDays    = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	longMonths  = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	strftimeErr = "unsupported strftime directive %%%c"
)

// strftime is Python's datetime.strftime (C locale, glibc) for the
// directives templates use, including glibc's "-" no-padding flag.
func strftime(t time.Time, f string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if f[i] == '-' && i+1 < len(f) {
			pad = false
			i++
		}
		num := func(v, w int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", w, v)
			} else {
				fmt.Fprintf(&b, "%d", v)
			}
		}
		switch f[i] {
		case 'Y':
			b.WriteString(fmt.Sprint(t.Year()))
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if pad {
				fmt.Fprintf(&b, "%2d", t.Day())
			} else {
				num(t.Day(), 1)
			}
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'A':
			b.WriteString(longDays[t.Weekday()])
		case 'a':
			b.WriteString(longDays[t.Weekday()][:3])
		case 'B':
			b.WriteString(longMonths[t.Month()-1])
		case 'b', 'h':
			b.WriteString(longMonths[t.Month()-1][:3])
		case 'w':
			b.WriteString(fmt.Sprint(int(t.Weekday())))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(fmt.Sprint(wd))
		case 'F':
			fmt.Fprintf(&b, "%d-%02d-%02d", t.Year(), t.Month(), t.Day())
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'D':
			fmt.Fprintf(&b, "%02d/%02d/%02d", t.Month(), t.Day(), t.Year()%100)
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf(strftimeErr, f[i])
		}
	}
	return b.String(), nil
}

// rangeLen is len(range(a[0], a[1], a[2])), known before the range is built.
func rangeLen(a [3]int) int64 {
	lo, hi, step := int64(a[0]), int64(a[1]), int64(a[2])
	switch {
	case step > 0 && lo < hi:
		return (hi - lo + step - 1) / step
	case step < 0 && lo > hi:
		return (lo - hi - step - 1) / -step
	}
	return 0
}
