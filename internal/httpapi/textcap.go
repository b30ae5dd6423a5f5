package httpapi

import "github.com/switchyard-llm/switchyard/internal/apicore"

// The bound on text before it is tokenized. Encoding is the costly part of a text
// request (a 16 MiB prompt took tens of seconds of CPU before its 400 for
// max_model_len), and a text's byte length alone can prove it too long: no token
// stands for more than a tokenizer's longest token, so B bytes are at least
// ceil(B / longest) tokens.

// tokenBounder is a tokenizer that knows the most bytes of a text one token can
// stand for (tokenizer.Tokenizer.MaxTokenBytesOf); 0 = it has no such bound.
type tokenBounder interface{ MaxTokenBytesOf(text string) int }

// checkTextLen refuses, without tokenizing it, a text that encodes to more tokens
// than max_model_len (the largest ready engine's, else config.json's, else
// apicore.MaxPromptTokens): the 400 of a prompt longer than the context.
func (a *API) checkTextLen(param, text string) *APIError {
	b, ok := a.text.Tokenizer.(tokenBounder)
	maxLen := a.maxModelLen()
	if maxLen <= 0 {
		maxLen = apicore.MaxPromptTokens
	}
	// The cheap test first: most texts are far below any bound.
	if !ok || int64(len(text)) <= maxLen {
		return nil
	}
	perToken := int64(b.MaxTokenBytesOf(text))
	n := len(text)
	if perToken <= 0 || int64(n) <= maxLen*perToken {
		return nil
	}
	least := (int64(n) + perToken - 1) / perToken
	return badRequest(param, "The decoder prompt (%d bytes of text, so at least %d tokens) is longer than the maximum model length of %d.",
		n, least, maxLen)
}
