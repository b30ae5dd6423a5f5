package tokenizer

import (
	"encoding/json"
	"strings"
)

// hostileCorpus is the differential corpus: scripts, emoji, whitespace runs, code, special-token
// text inside user content, digit runs, contractions, long inputs.
func hostileCorpus() []string {
	c := []string{
		"", " ", "  ", "\n", "\r\n", "\t", "a", "Hello world", " Hello world", "Hello  world ",
		"Hello world, it's 2026!  \n\n  Ok",
		"I'M HERE, YOU'LL SEE, SHE'S, WE'VE, THEY'RE, I'D, DON'T 'S 'll 'Ll 'LL 'sS", "'s's'S'", "it'ſ", "x'ſ'K",
		"The quick brown fox jumps over the lazy dog.",
		"1 12 123 1234 12345 123456 1234567 3.14159 -42 1,000,000 ٣٤٥ ۱۲۳ १२३ 一二三 Ⅻ ½",
		"日本語のテキストと漢字、カタカナ。中文文本测试，繁體中文。한국어 텍스트입니다.",
		"العربية نص عربي مع أرقام ١٢٣ وعلامات، ترقيم؟ עברית טקסט מימין לשמאל! שָׁלוֹם",
		"हिन्दी पाठ देवनागरी में। ภาษาไทยไม่มีช่องว่างระหว่างคำ Русский текст, Ёё. Ελληνικά κείμενο ΣΊΣΥΦΟΣ ς",
		"emoji 😀😃😄 👍🏻👍🏿 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵🇩🇪 ❤️ 🧑🏽‍💻 🫠 ☃ ⭢",
		"combining: e\u0301 a\u0308 n\u0303 \u0301 \u0301\u0301x Å Å ﬁ ﬀ ㎏ Ⓐ ＡＢＣ　全角",
		"zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u00a0nbsp\u2028ls\u2029ps\u0085nel\u3000ideo\u180e",
		"func main() {\n\tfmt.Println(\"hi\")\n\tfor i := 0; i < 10; i++ {\n\t\tx[i] = i*2\n\t}\n}\n",
		"def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # comment\n\n\nclass A:\n    pass\n",
		`{"key": "value", "n": 12345, "arr": [true, false, null], "nested": {"x": "\u00e9"}}`,
		"<!DOCTYPE html><html><body><div class=\"x\">&amp; &lt;tag&gt; <br/></div></body></html>",
		"<|begin_of_text|>Hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi",
		"<s>[INST] hi [/INST]</s><s> x </s><unk>", "<|im_start|>system\nYou are<|im_end|>\n<|im_start|>user",
		"<bos><start_of_turn>user\nhi<end_of_turn>\n<eos><pad><mask>[multimodal]",
		"<｜begin▁of▁sentence｜>hello<｜User｜>x<｜Assistant｜><｜fim▁hole｜> <｜fim▁begin｜>a<｜fim▁end｜>",
		"<|startoftext|><|endoftext|><|return|><|constrain|><|channel|>analysis<|message|>hi<|end|>",
		"<tool_call>{\"a\":1}</tool_call><|fim_prefix|><|fim_middle|><|fim_suffix|>",
		"<|begin_of_text|", "<|im_start", "<s", "< s >", "<<s>>", "<s><s><s>",
		"tabs\t\t\tand  spaces   \t \n \n\n\n   end   ", "\r\n\r\n\r\r\n\n\r", "   \n", "\n   ", "a\n\n\nb", "a \n b",
		"trailing spaces      ", "      leading spaces", "x\u3000\u3000y", "! ! !! ?? ... --- ==> /// \\\\ ''' \"\"\"",
		"ＡＢＣ！？ ｱｲｳ", "İstanbul ıi IJ ǅ ß ẞ Σσς", "\u0000\u0001\u001f\u007f\u0080\u009f",
		"\ufffd\ufffd replacement", "\U0001F600\U0010FFFF\U000E0001", "a\u0300\u0300\u0300\u0300\u0300\u0300\u0300\u0300",
		"mixed123abc456DEF789ghi0", "CamelCaseWordsAndHTTPServer XMLHttpRequest iPhone eBay McDonald's",
		"URL: https://example.com/path?q=1&r=two#frag user@example.org",
		"$$$ %%% ^^^ &&& *** ((( ))) ___ +++ ``` ~~~ |||", "....................................................",
		"a/b//c///d\n/e", "x!\n/y", "ᏣᎳᎩ ᐃᓄᒃᑎᑐᑦ ⴰⵣⵉⴳⵖ ꦧꦱꦗꦮ",
	}
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2300)
	c = append(c, long)
	c = append(c, strings.Repeat("a", 100000))
	// Shorter runs of the other shapes.
	c = append(c, strings.Repeat(" ", 10000))
	c = append(c, strings.Repeat("日本", 5000))
	c = append(c, strings.Repeat("1", 10000))
	c = append(c, strings.Repeat("😀", 2500))
	c = append(c, strings.Repeat("ab\n", 3300))
	var mixed strings.Builder
	for mixed.Len() < 100000 {
		for _, s := range c[:60] {
			mixed.WriteString(s)
		}
	}
	c = append(c, mixed.String())
	return c
}

// loneSurrogateJSON holds corpus entries only JSON can express: lone UTF-16 surrogates. JS keeps
// them in its string; Go's JSON decoder turns each into U+FFFD, and so does the Node binding when
// it hands the string to Rust as UTF-8, so both sides tokenize the same text.
var loneSurrogateJSON = []string{`"a\ud800b"`, `"\udfff"`, `"x\ud83dy\ude00z"`, `"\ud83d"`}

// corpusJSON renders the corpus as the JSON array the reference reads; the Go side reads the
// same bytes back so both see identical strings.
func corpusJSON(texts []string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("[")
	for i, s := range texts {
		if i > 0 {
			b.WriteString(",")
		}
		enc, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		b.Write(enc)
	}
	for _, s := range loneSurrogateJSON {
		b.WriteString(",")
		b.WriteString(s)
	}
	b.WriteString("]")
	return []byte(b.String()), nil
}
