package main

import (
	"strings"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// mockPooling reads --mock-pooling: the vLLM tasks a pooling mock model serves;
// empty = none (a generative model).
func mockPooling(v string) *mockengine.PoolingModel {
	var tasks []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			tasks = append(tasks, part)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	return &mockengine.PoolingModel{Tasks: tasks}
}
