package bootstrap

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// validationIssue is one entry of a FastAPI 422 "detail" list.
type validationIssue struct {
	Type  string          `json:"type"`
	Loc   []any           `json:"loc"`
	Msg   string          `json:"msg"`
	Input json.RawMessage `json:"input"`
}

// decodeRegistration decodes a /register body the way vLLM's pydantic model
// does in lax mode: required engine_id, dp_rank, tp_rank, pp_rank, addr;
// ranks as integers or decimal strings; unknown fields ignored (newer
// clients send tp_size, pcp_rank, ...). It reports every problem at once, as
// pydantic does.
func decodeRegistration(body []byte) (Registration, []validationIssue) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var probe any
		if json.Unmarshal(body, &probe) == nil {
			return Registration{}, []validationIssue{{
				Type: "model_attributes_type", Loc: []any{"body"},
				Msg: "Input should be a valid dictionary or object to extract fields from", Input: rawOrNull(body),
			}}
		}
		return Registration{}, []validationIssue{{
			Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: json.RawMessage(`{}`),
		}}
	}
	if fields == nil { // the body was JSON null
		return Registration{}, []validationIssue{{
			Type: "model_attributes_type", Loc: []any{"body"},
			Msg: "Input should be a valid dictionary or object to extract fields from", Input: json.RawMessage(`null`),
		}}
	}
	var reg Registration
	var issues []validationIssue
	str := func(name string, dst *string) {
		raw, ok := fields[name]
		if !ok {
			issues = append(issues, validationIssue{Type: "missing", Loc: []any{"body", name}, Msg: "Field required", Input: rawOrNull(body)})
			return
		}
		if err := json.Unmarshal(raw, dst); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			issues = append(issues, validationIssue{Type: "string_type", Loc: []any{"body", name}, Msg: "Input should be a valid string", Input: raw})
		}
	}
	integer := func(name string, dst *int, required bool) {
		raw, ok := fields[name]
		if !ok || (!required && bytes.Equal(bytes.TrimSpace(raw), []byte("null"))) {
			if required {
				issues = append(issues, validationIssue{Type: "missing", Loc: []any{"body", name}, Msg: "Field required", Input: rawOrNull(body)})
			}
			return
		}
		v, typ, msg := laxInt(raw)
		if typ != "" {
			issues = append(issues, validationIssue{Type: typ, Loc: []any{"body", name}, Msg: msg, Input: raw})
			return
		}
		*dst = v
	}
	str("engine_id", &reg.EngineID)
	integer("dp_rank", &reg.DP, true)
	integer("tp_rank", &reg.TP, true)
	integer("pp_rank", &reg.PP, true)
	str("addr", &reg.Addr)
	integer("tp_size", &reg.TPSize, false)
	integer("pp_size", &reg.PPSize, false)
	// A size that was sent must be positive; -1 makes Register refuse it
	// with the branch's 400 rather than read it as "not sent".
	for _, f := range []struct {
		name string
		v    *int
	}{{"tp_size", &reg.TPSize}, {"pp_size", &reg.PPSize}} {
		if raw, ok := fields[f.name]; ok && *f.v < 1 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			*f.v = -1
		}
	}
	return reg, issues
}

// laxInt parses a JSON integer, an integral float or a decimal string, and
// returns the pydantic error type and message otherwise.
func laxInt(raw json.RawMessage) (int, string, string) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, "int_type", "Input should be a valid integer"
	}
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(x.String(), 10, 0); err == nil {
			return int(n), "", ""
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, "int_from_float", "Input should be a valid integer, got a number with a fractional part"
		}
		return int(f), "", ""
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 0); err == nil {
			return int(n), "", ""
		}
		return 0, "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
	}
	return 0, "int_type", "Input should be a valid integer"
}

func rawOrNull(b []byte) json.RawMessage {
	if !json.Valid(b) {
		return json.RawMessage(`null`)
	}
	return json.RawMessage(bytes.TrimSpace(b))
}

// errorBody is the 400/404 body: "detail" as vLLM writes it, plus a hint
// for humans that vLLM ignores.
type errorBody struct {
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}
