package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	ardan "github.com/ardanlabs/jinja"
	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
)

// candidate renders one case the way its library is meant to be driven
// for a transformers chat template.
type candidate struct {
	name   string
	render func(c refCase) (string, error)
}

var candidates = []candidate{
	{"ours (chattemplate)", renderOurs},
	{"github.com/ardanlabs/jinja v1.8.0", renderArdan},
	{"github.com/ardanlabs/jinja v1.8.0 (Go maps)", renderArdanMaps},
	{"github.com/nikolalohinski/gonja/v2 v2.9.1", renderGonja},
}

// safeRender turns a panic into an error and reports it.
func safeRender(cd candidate, c refCase) (out string, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			out, err, panicked = "", fmt.Errorf("panic: %v", r), true
		}
	}()
	out, err = cd.render(c)
	return out, err, false
}

// renderOurs drives chattemplate as its own differential test does.
func renderOurs(c refCase) (string, error) {
	tpl, err := chattemplate.Parse(c.Template)
	if err != nil {
		return "", err
	}
	in := chattemplate.Input{AddGenerationPrompt: c.AddGenerationPrompt, SpecialTokens: c.Special,
		Now: func() time.Time { return pinned }}
	if in.Messages, err = chattemplate.DecodeMessages(c.Messages); err != nil {
		return "", err
	}
	for _, f := range []struct {
		raw json.RawMessage
		dst *[]any
	}{{c.Tools, &in.Tools}, {c.Documents, &in.Documents}} {
		if len(f.raw) > 0 && string(f.raw) != "null" {
			v, err := chattemplate.DecodeJSON(f.raw)
			if err != nil {
				return "", err
			}
			*f.dst = v.([]any)
		}
	}
	if len(c.Kwargs) > 0 {
		v, err := chattemplate.DecodeJSON(c.Kwargs)
		if err != nil {
			return "", err
		}
		o := v.(*chattemplate.Object)
		in.Kwargs = map[string]any{}
		for _, k := range o.Keys() {
			in.Kwargs[k], _ = o.Get(k)
		}
	}
	return tpl.Render(in)
}

// renderArdan hands ardanlabs/jinja ordered values (its Dict keeps insertion
// order) and a pinned strftime_now; raise_exception is its own builtin.
func renderArdan(c refCase) (string, error) {
	tpl, err := ardan.Compile(c.Template)
	if err != nil {
		return "", err
	}
	data := map[string]ardan.Value{}
	for k, v := range c.Special {
		data[k] = ardan.NewString(v)
	}
	if len(c.Kwargs) > 0 {
		kw, err := ardanValue(c.Kwargs)
		if err != nil {
			return "", err
		}
		for _, k := range kw.AsDict().OrderedKeys() {
			data[k], _ = kw.AsDict().Get(k)
		}
	}
	for k, raw := range map[string]json.RawMessage{"messages": c.Messages, "tools": c.Tools, "documents": c.Documents} {
		if data[k], err = ardanValue(raw); err != nil {
			return "", err
		}
	}
	data["add_generation_prompt"] = ardan.NewBool(c.AddGenerationPrompt)
	data["strftime_now"] = ardan.NewCallable("strftime_now", func(args []ardan.Value, _ map[string]ardan.Value) (ardan.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return ardan.Undefined(), fmt.Errorf("strftime_now takes one string")
		}
		return ardan.NewString(strftime(pinned, args[0].AsString())), nil
	})
	return tpl.RenderValues(data)
}

// renderArdanMaps drives ardanlabs/jinja through Render with plain Go maps,
// as its README shows: map key order is lost there.
func renderArdanMaps(c refCase) (string, error) {
	tpl, err := ardan.Compile(c.Template)
	if err != nil {
		return "", err
	}
	data, err := goMaps(c)
	if err != nil {
		return "", err
	}
	delete(data, "raise_exception") // its builtin raises as jinja2's does
	data["strftime_now"] = ardan.NewCallable("strftime_now", func(args []ardan.Value, _ map[string]ardan.Value) (ardan.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return ardan.Undefined(), fmt.Errorf("strftime_now takes one string")
		}
		return ardan.NewString(strftime(pinned, args[0].AsString())), nil
	})
	return tpl.Render(data)
}

// ardanValue decodes JSON into ordered ardanlabs values (null for empty).
func ardanValue(raw json.RawMessage) (ardan.Value, error) {
	if len(raw) == 0 {
		return ardan.None(), nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return ardanNext(d)
}

func ardanNext(d *json.Decoder) (ardan.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return ardan.None(), err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			var items []ardan.Value
			for d.More() {
				v, err := ardanNext(d)
				if err != nil {
					return v, err
				}
				items = append(items, v)
			}
			_, err = d.Token()
			return ardan.NewList(items), err
		}
		obj := ardan.NewDict()
		for d.More() {
			k, _ := d.Token()
			v, err := ardanNext(d)
			if err != nil {
				return v, err
			}
			obj.AsDict().Set(k.(string), v)
		}
		_, err = d.Token()
		return obj, err
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return ardan.NewInt(i), nil
		}
		f, err := x.Float64()
		return ardan.NewFloat(f), err
	case string:
		return ardan.NewString(x), nil
	case bool:
		return ardan.NewBool(x), nil
	}
	return ardan.None(), nil
}

// renderGonja configures gonja as transformers configures jinja2
// (trim_blocks, lstrip_blocks) with plain Go maps and the two globals.
func renderGonja(c refCase) (string, error) {
	cfg := gonja.DefaultConfig.Inherit()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	ldr, err := loaders.NewMemoryLoader(map[string]string{"/case": c.Template})
	if err != nil {
		return "", err
	}
	tpl, err := exec.NewTemplate("/case", cfg, ldr, gonja.DefaultEnvironment)
	if err != nil {
		return "", err
	}
	data, err := goMaps(c)
	if err != nil {
		return "", err
	}
	return tpl.ExecuteToString(exec.NewContext(data))
}

func init() { gonja.SetLoggerOutput(io.Discard) }

// goMaps is the render context as plain Go values (map[string]any objects,
// int64 integers) with raise_exception and a pinned strftime_now.
func goMaps(c refCase) (map[string]any, error) {
	data := map[string]any{}
	for k, v := range c.Special {
		data[k] = v
	}
	if kw, err := decodeAny(c.Kwargs); err != nil {
		return nil, err
	} else if m, ok := kw.(map[string]any); ok {
		for k, v := range m {
			data[k] = v
		}
	}
	var err error
	for k, raw := range map[string]json.RawMessage{"messages": c.Messages, "tools": c.Tools, "documents": c.Documents} {
		if data[k], err = decodeAny(raw); err != nil {
			return nil, err
		}
	}
	data["add_generation_prompt"] = c.AddGenerationPrompt
	data["raise_exception"] = func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) }
	data["strftime_now"] = func(f string) string { return strftime(pinned, f) }
	return data, nil
}
