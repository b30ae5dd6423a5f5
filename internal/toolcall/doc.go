/*
Package toolcall turns model text into OpenAI tool calls the way vLLM's
tool parsers do (--tool-call-parser), for complete answers and for
streamed deltas. It does no IO and knows nothing of HTTP: the chat handler
feeds it text and serializes what comes back.

# Choosing a parser

	p, ok := toolcall.Lookup("hermes") // the --tool-call-parser name
	toolcall.Names()                   // every registered name

A Parser is stateless and safe for concurrent use.

# Complete answers

	r := p.Parse(content, tools, toolcall.NewID)

content is the answer text after the reasoning parser took its part (vLLM
parses tools from the content only). r.Called is vLLM's tools_called; when
it is false there are no calls and r.Content is the text unchanged
(for openai, the harmony content). When
it is true, r.Calls holds the calls (id, name, arguments as a JSON string
written as vLLM writes it) and r.Content the text outside them (nil for
vLLM's None). ParseContent (below) adds the serving layer's rules.

# Streaming

One Stream per choice, fed in order:

	st := p.NewStream(tools, toolcall.NewID)
	for each engine output {
		d := st.Feed(deltaText, len(deltaTokenIDs))
		if final {
			d, called = st.Finish(d)
		}
		// send d (nil: nothing to send, except on the final output,
		// which carries the finish_reason with an empty delta)
	}

Feed returns what vLLM's extract_tool_calls_streaming returns: nil for
None, else a Delta with optional content and tool-call entries. The first
entry of a call carries its index, id, type "function" and name; later ones
carry argument fragments. Finish applies the serving layer's end-of-stream
check: when the final output's delta carries argument text, vLLM replaces
it with the arguments the parser expected minus what it streamed. called
is vLLM's auto_tools_called; finish_reason is "tool_calls" when it is true
or when any streamed delta carried tool calls.

Feed the text vLLM's detokenizer would produce for the request: special
tokens skipped or kept as the request's skip_special_tokens says, except
that hermes forces it false when tools are offered and tool_choice is not
"none" (vLLM's adjust_request). The markers these parsers look for
(<tool_call>, <｜tool▁calls▁begin｜>, …) are ordinary added tokens that
stay in the text; llama3_json works with or without its special
<|python_tag|>. openai is the exception: vLLM reads harmony from token ids,
so its text must keep harmony's special tokens (<|channel|>, <|message|>,
<|call|>, …) whatever the request says. Markers are matched in the text;
a marker that is one token arrives whole in one delta, which is what the
token-id checks of vLLM's parsers rely on.

The final engine output is usually the end-of-sequence token, whose text is
empty: feed it like any other (Feed("", 1)) and pass the result to Finish.

With parallel_tool_calls false, vLLM keeps only the first call:
FirstCall for complete answers, FirstCallDelta (entries with index 0) for
each streamed delta.

# tool_choice

A named function or "required" is not read by the parsers: vLLM forces the
answer with a JSON schema and reads it as JSON (choice.go).

	c := toolcall.ParseToolChoice(rawToolChoice)
	schema, ok, err := toolcall.SchemaForChoice(c, tools) // err: a 400, vLLM's text
	// ok: send schema as structured_outputs {"json": schema}, replacing
	// response_format and any structured_outputs of the request
	calls, _ := toolcall.ParseForced(c, content, toolcall.NewID) // complete
	st := toolcall.NewForcedStream(c, toolcall.NewID)             // streamed: a Stream

A forced answer's message content is "" beside the calls; finish_reason is
the engine's for a named function and "tool_calls" for "required" (complete:
when the engine's is "stop"; streamed: once a delta carried calls).

# Reasoning and tools together

Where a reasoning parser runs too, vLLM hands the tool parser only what
follows the end of reasoning, and in the delta that ends it the tool
parser's result replaces the reasoning part. ChatStream does exactly that:

	rs := rp.NewStream() // package reasoning
	cs := toolcall.NewChatStream(rs, rp.PromptEndsReasoning(prompt), p.NewStream(tools, nil))
	d := cs.Feed(text, tokens) // Delta with Reasoning, Content and Calls
	final, called := cs.Finish(last)

For complete answers vLLM splits reasoning first and parses tools from the
content; ParseContent does that step with the serving layer's rules:

	r, c := rp.Split(text)
	calls, content := toolcall.ParseContent(p, c, tools, toolcall.NewID)

# gpt-oss

The "openai" parser reads the harmony format and also fills Reasoning (the
analysis channel) in Result and Delta. vLLM treats gpt-oss models this way
whatever the flags: streaming always goes through the harmony step (the
openai Stream, calls included), and a complete answer without
--tool-call-parser is split by HarmonySplit.

# Ids

newID makes call ids; toolcall.NewID gives vLLM's "chatcmpl-tool-" and
16 hex digits. Tests pass a counter. qwen3_coder's streaming ids come from
its own "call_" scheme in vLLM; newID is used there too.

# Work per delta

Like vLLM, most parsers re-read the text of the current call on every
delta, so a call of n characters costs O(n^2) over its stream; hermes and
llama3_json skip calls that are complete.

A Stream is not safe for concurrent use.
*/
package toolcall
