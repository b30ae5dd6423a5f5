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
it is false the message content is r.Content and there are no calls. When
it is true, r.Calls holds the calls (id, name, arguments as a JSON string
written as vLLM writes it) and r.Content the text outside them (nil for
vLLM's None). vLLM's serving layer then turns a content that is only
whitespace into null; that step is the caller's.

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

Text must be detokenized with special tokens kept (vLLM's hermes parser
sets skip_special_tokens=false for this reason): markers such as
<tool_call> or <｜tool▁calls▁begin｜> are matched in the text. A marker that
is one token arrives whole in one delta, which is what the token-id checks
of vLLM's parsers rely on.

Where reasoning is parsed too, vLLM hands the tool parser only what follows
the end of reasoning: feed the content part of the delta that ends the
reasoning, then every later delta.

# Ids

newID makes call ids; toolcall.NewID gives vLLM's "chatcmpl-tool-" and
16 hex digits. Tests pass a counter. qwen3_coder's streaming ids come from
its own "call_" scheme in vLLM; newID is used there too.

A Stream is not safe for concurrent use. Its work per delta is bounded by
the text of the current call, not of the whole answer, where the parser
allows it.
*/
package toolcall
