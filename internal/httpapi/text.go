package httpapi

// Text in, text out: what serve needs when it runs with --tokenizer. The tokenizer
// and the chat template engine are other packages (tokenizer, chattemplate); serve
// knows them only through the small interfaces here, so the request paths are tested
// with stand-ins and stay out of the dispatch packages.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/textgen"
	"github.com/switchyard-llm/switchyard/internal/toolcall"
)

// TextTokenizer is what serve needs of a tokenizer: encoding prompts, the text core's
// decoding, and raw token strings for /tokenize's return_token_strs.
type TextTokenizer interface {
	textgen.Tokenizer
	Encode(text string, addSpecial bool) []int64
	// IDToToken is the vocabulary entry of id (convert_ids_to_tokens), "" if none.
	IDToToken(id int64) string
}

// ChatInput is what a chat template is rendered with (transformers'
// apply_chat_template arguments), values decoded as Python's json module decodes
// them (chattemplate.DecodeJSON: ordered objects, integers as integers).
type ChatInput = chattemplate.Input

// ChatTemplate renders conversations to prompt text (*chattemplate.Template).
// A render stops when ctx (the request's: cancelled when the client goes) is
// done.
type ChatTemplate interface {
	RenderContext(ctx context.Context, in ChatInput) (string, error)
	// ContentFormat is "string" (message content as a string) or "openai" (a list
	// of typed parts), what the template expects.
	ContentFormat() string
}

// Text is serve's text model: nil when serve has no tokenizer (token ids only).
type Text struct {
	// Name is the served model name (--served-model-name, default the directory's
	// base name); Root is the model directory (/v1/models' root).
	Name, Root string
	// MaxModelLen is the context length from config.json; 0 = the engines'.
	MaxModelLen int64
	Tokenizer   TextTokenizer
	// Template is the default chat template; nil = the model has none and chat
	// requests must bring one (chat_template).
	Template ChatTemplate
	// ScoreTemplate is --chat-template's template alone (nil without the flag):
	// vLLM's /score and /rerank render a (query, document) pair through it, never
	// through the model's own template (score.go).
	ScoreTemplate ChatTemplate
	// Templates are named templates (a list-valued chat_template), and Parse
	// compiles a request's own chat_template; nil = requests may not bring one.
	Templates map[string]ChatTemplate
	Parse     func(src string) (ChatTemplate, error)
	// TrustRequestChatTemplate lets requests bring their own chat template
	// (chat_template, chat_template_kwargs.chat_template); false refuses them, as
	// vLLM does without --trust-request-chat-template: a request's template is
	// code, and a short one can run for minutes and take gigabytes.
	TrustRequestChatTemplate bool
	// CleanUpTokenizationSpaces is tokenizer_config.json's flag: /detokenize
	// applies it as transformers' decode does (detokenize.go).
	CleanUpTokenizationSpaces bool
	// SpecialTokens are the tokenizer config's special token strings a template
	// reads (bos_token, eos_token, ...).
	SpecialTokens map[string]string
	// DefaultSampling are generation_config.json's sampling defaults, applied to
	// the fields a request leaves out (vLLM's --generation-config auto).
	DefaultSampling map[string]float64
	// EOSTokenIDs, when set, are the EOS ids of text requests only (the embedded
	// model's; with --tokenizer serve's own EOS ids apply to every request).
	EOSTokenIDs []int64
	// TokenCompat answers a completions request without text (token-id prompts,
	// no stop strings, echo or logprobs) exactly as serve without a tokenizer
	// does: token ids, no text, any model name. The embedded default sets it, so
	// the token API behaves as before while text requests get text.
	TokenCompat bool
	// ToolParser is --tool-call-parser's parser (nil: none); with AutoToolChoice
	// (--enable-auto-tool-choice) it reads tool_choice "auto" answers.
	// ReasoningParser is --reasoning-parser's name ("": none). SetParsers sets them.
	ToolParser      toolcall.Parser
	AutoToolChoice  bool
	ReasoningParser string
}

// textFor reports whether a completions request takes the text path.
func (a *API) textFor(req *CompletionRequest) bool {
	if a.text == nil {
		return false
	}
	return !a.text.TokenCompat || req.textPrompts != nil || req.refuseUnsupported() != nil
}

// errNeedsTokenizer is the answer to a text request when serve has no tokenizer.
func errNeedsTokenizer(param string) *APIError {
	return badRequest(param, "%s: text needs a tokenizer: start switchyard serve with --tokenizer MODEL_DIR "+
		"(the model directory vLLM is given); without one switchyard takes token ids only", param)
}

// checkModel answers a request that names a model serve does not serve with vLLM's
// 404. An empty name is the served model.
func (t *Text) checkModel(name string) *APIError {
	if name == "" || name == t.Name {
		return nil
	}
	return &APIError{Status: 404, Type: TypeNotFound, Param: "model", Message: fmt.Sprintf("The model `%s` does not exist.", name)}
}

// randomID is a vLLM-style request id: prefix and 32 random hex digits.
func randomID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// decodeOne decodes one token with special tokens kept: vLLM's token string in
// logprobs (convert_ids_list_to_tokens).
func (t *Text) decodeOne(id int64) string {
	return t.Tokenizer.Decode([]int64{id}, false)
}

// continueFinal cuts a conversation rendered without a generation prompt right
// after the final message's text, so the model continues it (transformers'
// continue_final_message).
func continueFinal(rendered string, msgs []map[string]any) (string, error) {
	if len(msgs) == 0 {
		return "", badRequest("continue_final_message", "continue_final_message needs at least one message")
	}
	final, ok := msgs[len(msgs)-1]["content"].(string)
	if !ok {
		if parts, isList := msgs[len(msgs)-1]["content"].([]any); isList {
			for i := len(parts) - 1; i >= 0 && !ok; i-- {
				if p, isObj := parts[i].(*chattemplate.Object); isObj {
					v, _ := p.Get("text")
					final, ok = v.(string)
				}
			}
		}
	}
	if !ok {
		return "", badRequest("continue_final_message", "continue_final_message is set but we could not find any text to continue in the final message!")
	}
	trimmed := strings.TrimSpace(final)
	loc := strings.LastIndex(rendered, trimmed)
	if loc < 0 {
		return "", badRequest("continue_final_message", "continue_final_message is set but the final message does not appear in the chat after applying the chat template! "+
			"This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible.")
	}
	left := strings.TrimLeft(final, " \t\n\r\v\f")
	if strings.HasPrefix(rendered[loc:], left) {
		return rendered[:loc+len(left)], nil
	}
	return rendered[:loc+len(trimmed)], nil
}
