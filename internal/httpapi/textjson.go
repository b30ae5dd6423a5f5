package httpapi

// Streamed text chunks written by hand: a chunk per output token is the hot path of
// a text stream, and encoding/json's reflection cost more than the detokenization
// itself. Only the common chunk (text, finish and stop reason) is written here;
// chunks with logprobs, token ids or usage go through encoding/json.

import (
	"strconv"
	"unicode/utf8"
)

// fastChunks reports whether the run's content chunks can be written by hand.
func (run *textRun) fastChunks() bool {
	return run.req.Logprobs == nil && !run.choiceIDs && !run.continuous && (run.chat == nil || run.chat.parse == nil)
}

// chunkPrefix is every chunk's opening up to the choice index.
func (run *textRun) chunkPrefix() []byte {
	obj := "text_completion"
	if run.chat != nil {
		obj = "chat.completion.chunk"
	}
	b := append([]byte(`{"id":`), nil...)
	b = appendJSONString(b, run.id)
	b = append(b, `,"object":"`...)
	b = append(b, obj...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, run.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, run.model)
	return append(b, `,"choices":[{"index":`...)
}

// appendChunk writes the chunk of delta d of choice i (fastChunks must hold).
func (run *textRun) appendChunk(dst, prefix []byte, i int, d delta) []byte {
	ch := &run.choices[i]
	dst = append(dst, prefix...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	if run.chat != nil {
		dst = append(dst, `,"delta":{"content":`...)
		dst = appendJSONString(dst, d.text)
		dst = append(dst, `},"logprobs":null,"finish_reason":`...)
	} else {
		dst = append(dst, `,"text":`...)
		if ch.echo != "" && !ch.sentRole {
			dst = appendJSONString(dst, ch.echo+d.text)
		} else {
			dst = appendJSONString(dst, d.text)
		}
		ch.sentRole = true
		dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	}
	if d.finish == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, *d.finish)
	}
	if run.chat == nil || d.finish != nil {
		dst = append(dst, `,"stop_reason":`...)
		switch v := d.stop.(type) {
		case string:
			dst = appendJSONString(dst, v)
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		default:
			dst = append(dst, "null"...)
		}
	}
	return append(dst, "}]}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 as U+FFFD (as encoding/json does); HTML
// characters are left as they are, as vLLM's pydantic writes them.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
