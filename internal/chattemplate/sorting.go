package chattemplate

import (
	"fmt"
	"sort"
	"strings"
)

// sortKey lower-cases strings unless case sensitive, as jinja2's ignore_case.
func sortKey(v any, caseSensitive bool) any {
	if s, ok := normalize(v).(string); ok && !caseSensitive {
		return strings.ToLower(s)
	}
	return v
}

func sortItems(items []any, key func(any) (any, error), reverse bool) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := keys[idx[a]], keys[idx[b]]
		if reverse {
			x, y = y, x
		}
		lt, err := less(x, y)
		if err != nil {
			sortErr = err
		}
		return lt
	})
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, sortErr
}

func sortFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	reverse := truthy(arg(args, kw, 0, "reverse", false))
	cs := truthy(arg(args, kw, 1, "case_sensitive", false))
	attr := arg(args, kw, 2, "attribute", nil)
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return sortItems(items, func(it any) (any, error) {
		if attr != nil {
			x, err := attrPath(it, attr)
			return sortKey(x, cs), err
		}
		return sortKey(it, cs), nil
	}, reverse)
}

func dictsortFilter(r *renderer, v any, args []any, kw map[string]any) (any, error) {
	cs := truthy(arg(args, kw, 0, "case_sensitive", false))
	by := arg(args, kw, 1, "by", "key")
	reverse := truthy(arg(args, kw, 2, "reverse", false))
	pos := 0
	switch by {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, fmt.Errorf("dictsort: you can only sort by either \"key\" or \"value\"")
	}
	if _, ok := dictKeys(normalize(v)); !ok {
		return nil, fmt.Errorf("dictsort needs a mapping")
	}
	items, err := r.callMethod(&method{recv: normalize(v), name: "items"}, nil, nil)
	if err != nil {
		return nil, err
	}
	return sortItems(normalize(items).([]any), func(it any) (any, error) { return sortKey(it.(tuple)[pos], cs), nil }, reverse)
}

func uniqueFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	cs := truthy(arg(args, kw, 0, "case_sensitive", false))
	attr := arg(args, kw, 1, "attribute", nil)
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var seen []any
	out := []any{}
	for _, it := range items {
		k := it
		if attr != nil {
			if k, err = attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		k = sortKey(k, cs)
		if !hashable(k) {
			return nil, fmt.Errorf("unhashable type: '%s'", typeName(k))
		}
		dup := false
		for _, s := range seen {
			if equal(s, k) {
				dup = true
				break
			}
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return generator(out), nil
}

func minMaxFilter(isMax bool) filterFn {
	return func(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
		cs := truthy(arg(args, kw, 0, "case_sensitive", false))
		attr := arg(args, kw, 1, "attribute", nil)
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{"min/max of empty sequence"}, nil
		}
		best, bestKey := items[0], any(nil)
		for i, it := range items {
			k := it
			if attr != nil {
				if k, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			k = sortKey(k, cs)
			if i == 0 {
				bestKey = k
				continue
			}
			a, b := k, bestKey
			if isMax {
				a, b = b, a
			}
			lt, err := less(a, b)
			if err != nil {
				return nil, err
			}
			if lt {
				best, bestKey = it, k
			}
		}
		return best, nil
	}
}
