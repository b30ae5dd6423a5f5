/*
Package reasoning splits model text into reasoning and content the way
vLLM's reasoning parsers do (--reasoning-parser), for complete answers and
for streamed deltas. It does no IO.

# Choosing a parser

A parser is bound to one request, because some read its
chat_template_kwargs (enable_thinking, thinking):

	p, ok := reasoning.Lookup("qwen3", reasoning.Options{ChatTemplateKwargs: kw})
	reasoning.Names() // every registered name

# Complete answers

	r, c := p.Split(text) // vLLM's extract_reasoning

nil stands for vLLM's None; a non-nil "" is an empty string (deepseek_r1
returns reasoning "" for "</think>rest").

# Streaming

vLLM first asks whether the prompt already closed reasoning (thinking
disabled puts "<think>\n\n</think>\n\n" in the prompt); if so every delta
is content and the parser is never called:

	ended := p.PromptEndsReasoning(renderedPrompt) // then all is content
	st := p.NewStream()
	for each delta {
		d, ends := st.Feed(text) // nil d: nothing to send
	}

Feed is vLLM's extract_reasoning_streaming. ends is vLLM's
is_reasoning_end over the delta's tokens: when a tool parser is active,
vLLM's serving layer stops calling this parser after that delta and gives
the tool parser the content part of it and everything after;
toolcall.ChatStream does that hand-off and takes a Stream as is (through
FeedSplit). Without a tool parser every delta goes through Feed.

Markers are matched in the text vLLM's detokenizer produces; <think> and
</think> are ordinary added tokens for these models, so they stay in it.
vLLM checks token ids; a marker that is one token arrives whole in one
delta, so the text checks see what the id checks see. A delta that is
exactly a marker counts as the marker token alone.

A Stream is not safe for concurrent use.
*/
package reasoning
