package server

import (
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/model"
)

// LoadText loads the tokenizer and chat template for Config.Text (see
// httpapi.LoadText).
func LoadText(dir, chatTemplate, servedName string) (*httpapi.Text, *model.Model, error) {
	return httpapi.LoadText(dir, chatTemplate, servedName)
}

// LoadEmbeddedText is the built-in mock engines' text (see httpapi.LoadEmbeddedText).
func LoadEmbeddedText(name string) (*httpapi.Text, error) {
	return httpapi.LoadEmbeddedText(name)
}
