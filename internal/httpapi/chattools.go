package httpapi

// Tool calls and reasoning in chat answers, as vLLM's OpenAI server gives them
// with --reasoning-parser and --tool-call-parser/--enable-auto-tool-choice: the
// reasoning parser splits the answer into message.reasoning and content, then
// the tool parser reads tool calls from the content (tool_choice "auto"), or a
// named function or "required" forces the answer with a JSON schema and reads it
// as JSON. The parsers themselves are packages toolcall and reasoning; this file
// is the serving layer's choices around them.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/reasoning"
	"github.com/switchyard-llm/switchyard/internal/toolcall"
)

// SetParsers checks serve's --enable-auto-tool-choice, --tool-call-parser and
// --reasoning-parser, as vLLM does at startup (an unknown name is refused,
// listing the known ones), and sets them on t when t is not nil.
func (t *Text) SetParsers(autoToolChoice bool, toolParser, reasoningParser string) error {
	var tp toolcall.Parser
	if toolParser != "" {
		p, ok := toolcall.Lookup(toolParser)
		if !ok {
			return fmt.Errorf("--tool-call-parser: unknown parser %q; known: %s", toolParser, strings.Join(toolcall.Names(), ", "))
		}
		tp = p
	}
	if autoToolChoice && tp == nil {
		return fmt.Errorf("--enable-auto-tool-choice requires --tool-call-parser")
	}
	if reasoningParser != "" {
		if _, ok := reasoning.Lookup(reasoningParser, reasoning.Options{}); !ok {
			return fmt.Errorf("--reasoning-parser: unknown parser %q; known: %s", reasoningParser, strings.Join(reasoning.Names(), ", "))
		}
	}
	if t != nil {
		t.ToolParser, t.AutoToolChoice, t.ReasoningParser = tp, autoToolChoice, reasoningParser
	}
	return nil
}

// chatParse is one chat request's parsing plan: nil on the request when no
// parser applies, so answers are the engine's text as before.
type chatParse struct {
	choice toolcall.ToolChoice
	tools  []toolcall.Tool
	// auto parses answers with --tool-call-parser (tool_choice "auto"); forced
	// reads them as the schema forced them (named or "required").
	auto     toolcall.Parser
	forced   bool
	reasoner reasoning.Parser
	// promptEnds: the rendered prompt already closed reasoning (thinking off).
	promptEnds bool
	// dropReasoning is include_reasoning false; firstOnly parallel_tool_calls false.
	dropReasoning, firstOnly bool
	// harmony: gpt-oss (--tool-call-parser openai), whose answers vLLM always
	// reads as harmony: analysis is the reasoning, final the content.
	harmony bool
}

// requestTools reads the request's tools as the parsers need them: name and
// parameters. nil: no tools; a non-nil empty list is "tools": [] (refused).
// A malformed list reads as none here; chatInput reports it.
func requestTools(raw json.RawMessage) []toolcall.Tool {
	if isNull(raw) {
		return nil
	}
	var list []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	tools := make([]toolcall.Tool, len(list))
	for i, t := range list {
		tools[i] = toolcall.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters}
	}
	return tools
}

// planParsing sets c.parse from the request and the server's parsers, with
// vLLM's 400s for a tool_choice the server cannot serve; a forced tool_choice
// replaces the request's structured outputs with the schema that forces it.
func (a *API) planParsing(c *ChatRequest) *APIError {
	tools := requestTools(c.Tools)
	choice := toolcall.ParseToolChoice(c.ToolChoice)
	schema, forced, err := toolcall.SchemaForChoice(choice, tools)
	if err != nil {
		var ce *toolcall.ChoiceError
		if e, ok := err.(*toolcall.ChoiceError); ok {
			ce = e
		} else {
			ce = &toolcall.ChoiceError{Param: "tool_choice", Message: err.Error()}
		}
		return badRequest(ce.Param, "%s", ce.Message)
	}
	mode := choice.Effective(tools)
	if a.text.ToolParser == nil && mode != toolcall.ChoiceNone {
		if mode == toolcall.ChoiceAuto {
			return badRequest("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set")
		}
		return badRequest("tool_choice", "tool_choice=\"%s\" requires --tool-call-parser to be set", choiceRepr(choice))
	}
	p := &chatParse{choice: choice, tools: tools, forced: choice.Forced(),
		dropReasoning: c.IncludeReasoning != nil && !*c.IncludeReasoning,
		firstOnly:     c.ParallelToolCalls != nil && !*c.ParallelToolCalls}
	if mode == toolcall.ChoiceAuto && a.text.AutoToolChoice {
		p.auto = a.text.ToolParser
	}
	p.harmony = a.text.ToolParser != nil && a.text.ToolParser.Name() == "openai" && !p.forced
	if a.text.ReasoningParser != "" && !p.harmony {
		kw, _ := templateKwargs(c.ChatTemplateKwargs)
		p.reasoner, _ = reasoning.Lookup(a.text.ReasoningParser, reasoning.Options{ChatTemplateKwargs: kw})
	}
	if p.auto == nil && !p.forced && p.reasoner == nil && !p.harmony {
		return nil
	}
	if p.harmony || (p.auto != nil || p.forced) && keepsSpecialTokens(a.text.ToolParser) {
		// vLLM's adjust_request: the parser reads markers that are special tokens.
		f := false
		c.SkipSpecialTokens = &f
	}
	if forced {
		c.StructuredOutputs = json.RawMessage(`{"json": ` + string(schema) + `}`)
		c.ResponseFormat, c.GuidedJSON, c.GuidedRegex, c.GuidedChoice, c.GuidedGrammar = nil, nil, nil, nil, nil
		s, err := c.structuredOutputs()
		if err != nil {
			return err.(*APIError)
		}
		c.structured = s
	}
	c.parse = p
	return nil
}

// keepsSpecialTokens: the parsers whose markers vLLM keeps in the text by
// turning skip_special_tokens off when tools are offered (hermes), or which
// read the answer's special tokens (openai's harmony).
func keepsSpecialTokens(p toolcall.Parser) bool {
	return p != nil && (p.Name() == "hermes" || p.Name() == "openai")
}

// choiceRepr is how vLLM's message prints a named tool_choice (a pydantic
// model's str).
func choiceRepr(c toolcall.ToolChoice) string {
	if c.Mode == toolcall.ChoiceNamed {
		return "type='function' function=ChatCompletionNamedFunction(name='" + c.Name + "')"
	}
	return c.Mode
}

// templateKwargs decodes chat_template_kwargs for the reasoning parsers that
// read it (enable_thinking, thinking).
func templateKwargs(raw json.RawMessage) (map[string]any, error) {
	if isNull(raw) {
		return nil, nil
	}
	var kw map[string]any
	err := json.Unmarshal(raw, &kw)
	return kw, err
}

// ToolCall is one call of a complete answer's message (vLLM's ToolCall).
type ToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is a call's function: its name and arguments (a JSON text).
type ToolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// message builds a complete answer's message from the choice's text, and the
// finish_reason vLLM gives it (engine is the engine's).
func (p *chatParse) message(text string, engine *string) (ChatMessage, *string) {
	m := ChatMessage{Role: "assistant", ToolCalls: []ToolCall{}}
	content := &text
	if p.reasoner != nil {
		m.Reasoning, content = p.reasoner.Split(text)
	}
	m.Content = content
	var calls []toolcall.Call
	toolsFinish := false
	switch {
	case p.harmony && p.auto != nil:
		r := p.auto.Parse(text, p.tools, nil)
		m.Reasoning, m.Content, calls, toolsFinish = r.Reasoning, r.Content, r.Calls, r.Called
	case p.harmony:
		m.Reasoning, m.Content = toolcall.HarmonySplit(text)
	case p.forced:
		calls, _ = toolcall.ParseForced(p.choice, content, nil)
		empty := ""
		m.Content = &empty
		toolsFinish = p.choice.Mode == toolcall.ChoiceRequired && engine != nil && *engine == "stop"
	case p.auto != nil:
		calls, m.Content = toolcall.ParseContent(p.auto, content, p.tools, nil)
		toolsFinish = len(calls) > 0
	}
	if p.dropReasoning {
		m.Reasoning = nil
	}
	if p.firstOnly {
		calls = toolcall.FirstCall(calls)
	}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Type: "function", Function: ToolCallFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if toolsFinish {
		fr := "tool_calls"
		return m, &fr
	}
	return m, engine
}

// choiceStream is one streamed choice's parsing state.
type choiceStream struct {
	cs       *toolcall.ChatStream
	streamed bool // a delta carried tool calls
}

// newStream starts the parsing of one streamed choice.
func (p *chatParse) newStream() *choiceStream {
	var tools toolcall.Stream
	switch {
	case p.forced:
		tools = toolcall.NewForcedStream(p.choice, nil)
	case p.auto != nil:
		tools = p.auto.NewStream(p.tools, nil)
	case p.harmony:
		// vLLM streams gpt-oss through harmony whatever the tools.
		op, _ := toolcall.Lookup("openai")
		tools = op.NewStream(p.tools, nil)
	}
	var r toolcall.Reasoner
	ends := true
	if p.reasoner != nil {
		r, ends = p.reasoner.NewStream(), p.promptEnds
	}
	return &choiceStream{cs: toolcall.NewChatStream(r, ends, tools)}
}

// DeltaToolCall is one entry of a streamed delta's tool_calls (vLLM's
// DeltaToolCall, unset fields left out).
type DeltaToolCall struct {
	ID       string             `json:"id,omitempty"`
	Type     string             `json:"type,omitempty"`
	Index    int                `json:"index"`
	Function *DeltaToolFunction `json:"function,omitempty"`
}

// DeltaToolFunction is a streamed call's name (first entry) or argument fragment.
type DeltaToolFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// feed runs one engine output's text through the parsers and returns the
// delta to send (ok false: nothing to send), and on the choice's last output
// the finish_reason vLLM gives.
func (p *chatParse) feed(st *choiceStream, d delta) (ChatDelta, *string, bool) {
	td := st.cs.Feed(d.text, len(d.ids))
	finish, called := d.finish, false
	if d.finished {
		td, called = st.cs.Finish(td)
	}
	st.streamed = st.streamed || td != nil && len(td.Calls) > 0
	if d.finished && (called || st.streamed && p.choice.Mode != toolcall.ChoiceNamed) {
		fr := "tool_calls"
		finish = &fr
	}
	if p.firstOnly {
		td = toolcall.FirstCallDelta(td)
	}
	if td == nil {
		return ChatDelta{}, finish, d.finished
	}
	out := ChatDelta{Content: td.Content}
	if !p.dropReasoning {
		out.Reasoning = td.Reasoning
	}
	if td.Calls != nil {
		out.ToolCalls = make([]DeltaToolCall, len(td.Calls))
		for i, c := range td.Calls {
			e := DeltaToolCall{ID: c.ID, Type: c.Type, Index: c.Index}
			if c.Name != "" || c.HasArgs {
				e.Function = &DeltaToolFunction{Name: c.Name}
				if c.HasArgs {
					args := c.Args
					e.Function.Arguments = &args
				}
			}
			out.ToolCalls[i] = e
		}
	}
	send := d.finished || out.Content != nil || out.Reasoning != nil || out.ToolCalls != nil
	return out, finish, send
}
