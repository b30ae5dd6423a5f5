package tokenizer

import "bytes"

// DecodeStream is incremental detokenization with the semantics of tokenizers' DecodeStream
// (tokenizers/src/tokenizer/mod.rs step_decode_stream): it keeps a window of ids whose decode
// starts with an already emitted prefix, and emits the new suffix once the window's decode
// grows and does not end in U+FFFD (an incomplete UTF-8 sequence).
//
// A DecodeStream is not safe for concurrent use; it allocates only while its buffers grow.
type DecodeStream struct {
	t           *Tokenizer
	skip        bool
	ids         []int64
	prefix      []byte
	prefixIndex int
	cur         []byte
	scratch     []byte
}

// NewDecodeStream starts a stream; skipSpecialTokens as for Decode.
func (t *Tokenizer) NewDecodeStream(skipSpecialTokens bool) *DecodeStream {
	return &DecodeStream{t: t, skip: skipSpecialTokens}
}

// Reset empties the stream for reuse, keeping its buffers.
func (d *DecodeStream) Reset() {
	d.ids = d.ids[:0]
	d.prefix = d.prefix[:0]
	d.prefixIndex = 0
}

// Step feeds one id and returns the newly completed text ("" when nothing is complete yet).
func (d *DecodeStream) Step(id int64) string {
	var buf [64]byte
	out := d.AppendStep(buf[:0], id)
	if len(out) == 0 {
		return ""
	}
	return string(out)
}

func endsWithFFFD(b []byte) bool { return bytes.HasSuffix(b, []byte("\uFFFD")) }

// AppendStep is Step appending the new text to dst.
func (d *DecodeStream) AppendStep(dst []byte, id int64) []byte {
	t := d.t
	if len(d.prefix) == 0 && len(d.ids) > 0 {
		d.cur = t.appendDecode(d.cur[:0], &d.scratch, d.ids, d.skip)
		if !endsWithFFFD(d.cur) {
			d.prefix, d.cur = d.cur, d.prefix
			d.prefixIndex = len(d.ids)
		}
	}
	d.ids = append(d.ids, id)
	d.cur = t.appendDecode(d.cur[:0], &d.scratch, d.ids, d.skip)
	if len(d.cur) <= len(d.prefix) || endsWithFFFD(d.cur) {
		return dst
	}
	if !bytes.HasPrefix(d.cur, d.prefix) {
		// tokenizers returns InvalidPrefix here; vLLM's FastIncrementalDetokenizer recovers by
		// starting a fresh stream with this id, and so do we.
		d.Reset()
		return d.AppendStep(dst, id)
	}
	dst = append(dst, d.cur[len(d.prefix):]...)
	newPrefixIndex := len(d.ids) - d.prefixIndex
	n := copy(d.ids, d.ids[d.prefixIndex:])
	d.ids = d.ids[:n]
	d.prefix = t.appendDecode(d.prefix[:0], &d.scratch, d.ids, d.skip)
	d.prefixIndex = newPrefixIndex
	return dst
}

// Prime feeds the tail of a prompt as vLLM's FastIncrementalDetokenizer does before the first
// generated token: the shortest suffix of 4..23 ids whose decode (with special tokens skipped,
// the Python binding's default) has no U+FFFD, or the whole prompt when there is none or the
// prompt has at most 4 ids. The text the prompt yields is discarded.
func (d *DecodeStream) Prime(promptIDs []int64) {
	suffix := promptIDs
	if n := len(promptIDs); n > 4 {
		var buf []byte
		for i := 4; i < min(n+1, 24); i++ {
			s := promptIDs[n-i:]
			buf = d.t.appendDecode(buf[:0], &d.scratch, s, true)
			if !bytes.Contains(buf, []byte("\uFFFD")) {
				suffix = s
				break
			}
		}
	}
	var sink [64]byte
	for _, id := range suffix {
		d.AppendStep(sink[:0], id)
	}
}
