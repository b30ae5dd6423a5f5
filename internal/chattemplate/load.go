package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// specialTokenNames are transformers' SPECIAL_TOKENS_ATTRIBUTES that hold a
// single token; apply_chat_template passes the ones that are set.
var specialTokenNames = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// FromTokenizerConfig reads tokenizer_config.json: its "chat_template" (a
// string, returned under the name "default", or a list of {name, template})
// and the special-token strings (plain strings or AddedToken objects
// {"content": ...}).
func FromTokenizerConfig(configJSON []byte) (tmpls map[string]*Template, special map[string]string, err error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return nil, nil, fmt.Errorf("chattemplate: tokenizer_config.json: %w", err)
	}
	special = map[string]string{}
	for _, name := range specialTokenNames {
		raw, ok := cfg[name]
		if !ok || string(raw) == "null" {
			continue // unset tokens are not in special_tokens_map
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			special[name] = s
			continue
		}
		var added struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(raw, &added) == nil && added.Content != nil {
			special[name] = *added.Content
		}
	}
	tmpls = map[string]*Template{}
	raw, ok := cfg["chat_template"]
	if !ok || string(raw) == "null" {
		return tmpls, special, nil
	}
	var single string
	if json.Unmarshal(raw, &single) == nil {
		t, err := Parse(single)
		if err != nil {
			return nil, nil, err
		}
		tmpls["default"] = t
		return tmpls, special, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, nil, fmt.Errorf("chattemplate: chat_template is neither a string nor a list of {name, template}: %w", err)
	}
	for _, e := range list {
		t, err := Parse(e.Template)
		if err != nil {
			return nil, nil, fmt.Errorf("chat template %q: %w", e.Name, err)
		}
		tmpls[e.Name] = t
	}
	return tmpls, special, nil
}

// LoadDir loads a model directory's chat templates as transformers does:
// tokenizer_config.json's chat_template, overridden by chat_template.jinja
// beside it (the newer layout), plus additional_chat_templates/NAME.jinja.
// def is the "default" template (nil when there is none); named holds the
// others by name.
func LoadDir(dir string) (def *Template, named map[string]*Template, special map[string]string, err error) {
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, nil, nil, err
	}
	named, special, err = FromTokenizerConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		t, err := Parse(string(b))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("chat_template.jinja: %w", err)
		}
		named["default"] = t
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, err
	}
	extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	sort.Strings(extra)
	for _, f := range extra {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, err
		}
		t, err := Parse(string(b))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		named[strings.TrimSuffix(filepath.Base(f), ".jinja")] = t
	}
	def = named["default"]
	delete(named, "default")
	return def, named, special, nil
}

// LoadFile parses a --chat-template FILE.
func LoadFile(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}

// ErrNoChatTemplate is returned by Select when no template applies, as
// transformers refuses to apply a chat template the tokenizer lacks.
var ErrNoChatTemplate = errors.New("chattemplate: the model has no chat template; pass one with --chat-template")

// Select picks the template transformers would: the one asked for by name,
// else "tool_use" when tools are given and it exists, else the default.
func Select(def *Template, named map[string]*Template, name string, hasTools bool) (*Template, error) {
	if name != "" && name != "default" {
		if t, ok := named[name]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("chattemplate: no chat template named %q", name)
	}
	if hasTools && name == "" {
		if t, ok := named["tool_use"]; ok {
			return t, nil
		}
	}
	if def == nil {
		return nil, ErrNoChatTemplate
	}
	return def, nil
}

// DecodeMessages decodes a JSON array of messages with DecodeJSON's Python
// semantics (ints stay ints, nested objects keep their key order).
func DecodeMessages(data []byte) ([]map[string]any, error) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("chattemplate: messages must be a JSON array")
	}
	out := make([]map[string]any, len(l))
	for i, e := range l {
		o, ok := e.(*Object)
		if !ok {
			return nil, fmt.Errorf("chattemplate: message %d is not an object", i)
		}
		out[i] = o.vals
	}
	return out, nil
}
