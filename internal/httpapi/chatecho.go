package httpapi

// Chat's echo as vLLM's: with echo true, the answer's content is prefixed with
// the last message's content when that message has the answer's role (the
// assistant's, or with add_generation_prompt false the last message's own), so
// a client continuing an assistant message gets the whole message back. A
// stream sends it as one chunk per choice after the role chunks.

import (
	"encoding/json"
	"strings"
)

// echoText is what echo prefixes: "" when echo is off or the roles differ.
func (r *ChatRequest) echoText() string {
	if !r.echo {
		return ""
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(r.Messages, &msgs) != nil || len(msgs) == 0 {
		return ""
	}
	last := msgs[len(msgs)-1]
	role := "assistant"
	if r.AddGenerationPrompt != nil && !*r.AddGenerationPrompt {
		role = last.Role
	}
	if last.Role != role {
		return ""
	}
	var s string
	if json.Unmarshal(last.Content, &s) == nil {
		return s
	}
	// A list of parts: vLLM's conversation holds their texts joined by newlines.
	var parts []struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(last.Content, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Text != nil {
			texts = append(texts, *p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// echoChunk is the streamed echo of choice i: its content, no logprobs.
func (run *textRun) echoChunk(i int) *ChatChunk {
	c := run.chatChunk(i, delta{text: run.choices[i].echo}, false)
	c.Choices[0].Logprobs, c.Choices[0].TokenIDs = nil, nil
	return c
}

// withEcho prefixes a non-streamed chat message's content with choice i's echo.
func (run *textRun) withEcho(i int, m *ChatMessage) {
	echo := run.choices[i].echo
	if echo == "" {
		return
	}
	content := echo
	if m.Content != nil {
		content += *m.Content
	}
	m.Content = &content
}
