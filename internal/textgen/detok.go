// Package textgen is the IO-free text core of one request: incremental detokenization
// of the engine's token ids as vLLM's FastIncrementalDetokenizer does it (a decode
// stream primed on the prompt's tail, skip_special_tokens, spaces_between_special_tokens),
// vLLM's stop-string rules (check_stop_strings: the search window, truncation,
// include_stop_str_in_output, the hold-back of a streamed tail that may still become
// a stop string, min_tokens), and the formatting of the engine's logprob arrays into
// the completions and chat shapes. It knows a tokenizer only through the small
// interfaces below, so it is table-tested without one.
package textgen

import (
	"strings"
	"unicode/utf8"
)

// Tokenizer is what the text core needs of a tokenizer.
type Tokenizer interface {
	// Decode decodes ids (HF tokenizers' decode).
	Decode(ids []int64, skipSpecial bool) string
	// NewStream returns a fresh incremental decoder (HF DecodeStream).
	NewStream(skipSpecial bool) Stream
	// AddedToken returns the content of an added token (tokenizer.json's
	// added_tokens), ok=false for any other id.
	AddedToken(id int64) (content string, ok bool)
	// HasAddedTokens reports whether the tokenizer has any added token.
	HasAddedTokens() bool
}

// Stream is an incremental decoder: each step appends the text that the new token
// completes (nothing while a UTF-8 sequence or a merge is still open).
type Stream interface {
	AppendStep(dst []byte, id int64) []byte
	// Prime feeds the prompt's tail, discarding its text.
	Prime(promptIDs []int64)
}

// Params are the sampling parameters the text core applies.
type Params struct {
	Stop                       []string
	IncludeStopStrInOutput     bool
	MinTokens                  int64
	SkipSpecialTokens          bool
	SpacesBetweenSpecialTokens bool
	// Stops is Stop compiled (CompileStops), built once per request and shared by
	// its choices; nil: New compiles Stop itself.
	Stops *StopSet
}

// Detokenizer turns one request's generated token ids into text and finds its stop
// strings. Not safe for concurrent use: one per choice, owned by the handler.
type Detokenizer struct {
	stream      Stream
	tok         Tokenizer
	stop        []string
	includeStop bool
	minTokens   int64
	// holdBack is vLLM's stop_buffer_length, in characters (code points): the
	// longest stop string minus one, while streaming, so a stop string split across
	// steps is never sent before it is recognised.
	holdBack int
	text     []byte // the output text so far (truncated at a stop string)
	sent     int    // bytes of text already returned by Next
	nOut     int64  // output tokens seen, the stop-terminating one included
	// spacesBetween false: two added tokens in a row are joined without the space
	// the decoder puts between them (vLLM's fast path with
	// spaces_between_special_tokens=False and skip_special_tokens=False).
	spacesBetween bool
	lastSpecial   bool
	stopped       bool
	// The automaton's run over the text: the node after text[:scanned]. set is nil
	// for the per-string search (few stop strings, or text that is not UTF-8).
	set     *StopSet
	node    int32
	scanned int
	// The held-back tail as last found: text[heldAt:heldTo] holds heldRunes
	// characters, and text[:heldTo] is UTF-8 unless heldBad. The next tail is found
	// by moving heldAt forward over the new text instead of walking back over the
	// whole tail each token (a stop string may be thousands of characters long).
	heldAt, heldTo, heldRunes int
	heldBad                   bool
}

// New starts the detokenizer of a request whose prompt is prompt.
func New(tok Tokenizer, prompt []int64, p Params) *Detokenizer {
	d := &Detokenizer{tok: tok, stream: tok.NewStream(p.SkipSpecialTokens), stop: p.Stop,
		includeStop: p.IncludeStopStrInOutput, minTokens: p.MinTokens}
	if len(p.Stop) > 0 && !p.IncludeStopStrInOutput {
		longest := 0
		for _, s := range p.Stop {
			longest = max(longest, utf8.RuneCountInString(s))
		}
		d.holdBack = longest - 1
	}
	if d.set = p.Stops; d.set == nil {
		d.set = CompileStops(p.Stop)
	}
	if len(prompt) > 0 {
		// The stream picks the prompt tail as vLLM's FastIncrementalDetokenizer does
		// (the shortest tail of 4 to 23 ids that decodes without U+FFFD).
		d.stream.Prime(prompt)
	}
	d.spacesBetween = p.SkipSpecialTokens || p.SpacesBetweenSpecialTokens || !tok.HasAddedTokens()
	return d
}

// decodeNext appends one token's text.
func (d *Detokenizer) decodeNext(id int64) {
	before := len(d.text)
	d.text = d.stream.AppendStep(d.text, id)
	if !d.spacesBetween {
		content, special := d.tok.AddedToken(id)
		if special && d.lastSpecial {
			d.text = append(d.text[:before], content...)
		}
		d.lastSpecial = special
	}
}

// Update is vLLM's IncrementalDetokenizer.update: it decodes the step's new tokens
// and checks the stop strings. stopTerminated says the engine finished the request
// with reason stop (EOS or a stop token id) in this step: that last token is not
// decoded unless include_stop_str_in_output. It returns the stop string that ended
// the request, if one did (the text is then truncated as vLLM truncates it).
func (d *Detokenizer) Update(ids []int64, stopTerminated bool) (string, bool) {
	if len(ids) == 0 || d.stopped {
		return "", false
	}
	skipped := false
	if stopTerminated && !d.includeStop {
		ids = ids[:len(ids)-1]
		skipped = true
	}
	checkFrom := len(d.text)
	for _, id := range ids {
		d.decodeNext(id)
		d.nOut++
		// Text of the first min_tokens tokens is never searched for stop strings.
		if d.minTokens > 0 && d.nOut <= d.minTokens {
			checkFrom = len(d.text)
		}
	}
	if skipped {
		d.nOut++
	}
	if len(d.stop) == 0 || d.nOut <= d.minTokens {
		return "", false
	}
	s, truncateTo, ok := d.checkStop(checkFrom)
	if !ok {
		return "", false
	}
	if truncateTo >= 0 {
		d.text = d.text[:truncateTo]
	}
	d.stopped = true
	return s, true
}

// checkStop searches the text after checkFrom for the stop strings. The automaton
// runs on from where it stopped, so each byte of the text is scanned once (the text
// of min_tokens too: its matches end before checkFrom and are not counted).
func (d *Detokenizer) checkStop(checkFrom int) (string, int, bool) {
	if d.set != nil && !validFrom(d.text, d.scanned, checkFrom) {
		d.set = nil
	}
	if d.set == nil {
		return CheckStopStrings(d.text, len(d.text)-checkFrom, d.stop, d.includeStop)
	}
	node, idx, end := d.set.scan(d.node, d.text, d.scanned, checkFrom)
	d.node, d.scanned = node, len(d.text)
	if idx < 0 {
		return "", -1, false
	}
	return d.set.result(d.text, idx, end, d.includeStop)
}

// CheckStopStrings is vLLM's check_stop_strings over UTF-8 text: newBytes is how
// much of text is new this step. Each stop string is searched for from where it
// could first overlap the new text. It returns the stop string found, and the byte
// length to truncate text to (-1: no truncation), ok=false when none is found.
func CheckStopStrings(text []byte, newBytes int, stop []string, includeInOutput bool) (string, int, bool) {
	if newBytes <= 0 || len(stop) == 0 {
		return "", -1, false
	}
	for _, s := range stop {
		if s == "" {
			continue
		}
		// Python: output_text.find(s, 1 - new_char_count - len(s)), in characters.
		start := backRunes(text, len(text)-newBytes, utf8.RuneCountInString(s)-1)
		i := strings.Index(string(text[start:]), s)
		if i < 0 {
			continue
		}
		at := start + i
		if includeInOutput {
			at += len(s)
			if at >= len(text) {
				return s, -1, true
			}
		}
		return s, at, true
	}
	return "", -1, false
}

// backRunes returns the byte offset n code points before off in text (0 at most).
func backRunes(text []byte, off, n int) int {
	for ; n > 0 && off > 0; n-- {
		if text[off-1] < utf8.RuneSelf { // ASCII, as DecodeLastRune would find, but cheaper
			off--
			continue
		}
		_, size := utf8.DecodeLastRune(text[:off])
		off -= size
	}
	return off
}

// Next returns the text not yet returned (get_next_output_text with delta=True):
// while the request runs, the last holdBack characters stay back, since they may
// still begin a stop string; once finished, everything.
func (d *Detokenizer) Next(finished bool) string {
	end := len(d.text)
	if !finished && d.holdBack > 0 {
		end = d.heldEnd()
	}
	if d.sent >= end {
		return ""
	}
	s := string(d.text[d.sent:end])
	d.sent = end
	return s
}

// AppendNext is Next appending to dst, for an allocation-free streaming path.
func (d *Detokenizer) AppendNext(dst []byte, finished bool) []byte {
	end := len(d.text)
	if !finished && d.holdBack > 0 {
		end = d.heldEnd()
	}
	if d.sent >= end {
		return dst
	}
	dst = append(dst, d.text[d.sent:end]...)
	d.sent = end
	return dst
}

// heldEnd is backRunes(d.text, len(d.text), d.holdBack). In UTF-8 a character
// counted back from the end is one counted forward, so the previous answer moves
// forward by the new text's characters; text that is not UTF-8, or a text cut
// shorter, is walked back as before.
func (d *Detokenizer) heldEnd() int {
	n := len(d.text)
	if d.heldBad || n < d.heldTo || !utf8.Valid(d.text[d.heldTo:]) {
		d.heldBad = true
		return backRunes(d.text, n, d.holdBack)
	}
	d.heldRunes += utf8.RuneCount(d.text[d.heldTo:])
	d.heldTo = n
	for ; d.heldRunes > d.holdBack; d.heldRunes-- {
		if d.text[d.heldAt] < utf8.RuneSelf {
			d.heldAt++
			continue
		}
		_, size := utf8.DecodeRune(d.text[d.heldAt:])
		d.heldAt += size
	}
	return d.heldAt
}

// Text is the whole output text so far (truncated at a stop string).
func (d *Detokenizer) Text() string { return string(d.text) }

// Stopped reports whether a stop string ended the request.
func (d *Detokenizer) Stopped() bool { return d.stopped }
