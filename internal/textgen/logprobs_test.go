package textgen

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

func i32s(rows, cols int64, v ...int32) wire.Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	shape := []int64{rows, cols}
	if cols == 0 {
		shape = []int64{rows}
	}
	return wire.Tensor{DType: "int32", Shape: shape, Data: b}
}

func f32s(rows, cols int64, v ...float32) wire.Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return wire.Tensor{DType: "float32", Shape: []int64{rows, cols}, Data: b}
}

func decodeName(id int64) string { return map[int64]string{1: "a", 2: "b", 3: "c", 4: "d"}[id] }

func TestLogprobFormats(t *testing.T) {
	// Two generated tokens, top-2: row 0 samples 1 (also the top-1), row 1 samples 4
	// (rank 3) with top-2 2 and 3; -inf is floored as vLLM floors it.
	l := &wire.LogprobsLists{
		LogprobTokenIDs:   i32s(2, 3, 1, 1, 2, 4, 2, 3),
		Logprobs:          f32s(2, 3, -0.5, -0.5, -1, -3, -1, float32(math.Inf(-1))),
		SampledTokenRanks: i32s(2, 0, 1, 3),
	}
	pos, err := Positions(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != 2 || len(pos[0].IDs) != 2 || pos[0].Ranks[0] != 1 || pos[1].Ranks[0] != 3 || pos[1].Ranks[2] != 2 {
		t.Fatalf("positions %+v", pos)
	}
	c := NewCompletionLogprobs(decodeName, 2, 0)
	c.Add(nil, []int64{1, 4}, pos)
	got, _ := json.Marshal(c)
	want := `{"text_offset":[0,1],"token_logprobs":[-0.5,-3],"tokens":["a","d"],"top_logprobs":[{"a":-0.5,"b":-1},{"b":-1,"c":-9999,"d":-3}]}`
	if string(got) != want {
		t.Errorf("completion logprobs\n got %s\nwant %s", got, want)
	}
	chat, _ := json.Marshal(ChatContent(decodeName, []int64{1, 4}, pos, 2))
	want = `[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[97]},{"token":"b","logprob":-1,"bytes":[98]}]},` +
		`{"token":"d","logprob":-3,"bytes":[100],"top_logprobs":[{"token":"d","logprob":-3,"bytes":[100]},{"token":"b","logprob":-1,"bytes":[98]}]}]`
	if string(chat) != want {
		t.Errorf("chat logprobs\n got %s\nwant %s", chat, want)
	}
	// Prompt logprobs: a row per prompt token after the first.
	pl := &wire.LogprobsTensors{LogprobTokenIDs: i32s(1, 2, 2, 3), Logprobs: f32s(1, 2, -2, -0.125), SelectedTokenRanks: i32s(1, 0, 2)}
	ppos, err := PromptPositions(pl)
	if err != nil {
		t.Fatal(err)
	}
	entries := append([]PromptEntry{nil}, PromptEntries(decodeName, ppos)...)
	got, _ = json.Marshal(entries)
	want = `[null,{"2":{"logprob":-2,"rank":2,"decoded_token":"b"},"3":{"logprob":-0.125,"rank":1,"decoded_token":"c"}}]`
	if string(got) != want {
		t.Errorf("prompt logprobs\n got %s\nwant %s", got, want)
	}
	// Echo: the prompt's tokens first (the first without logprobs), offsets from 0.
	e := NewCompletionLogprobs(decodeName, 1, 0)
	d := e.AddPrompt(nil, []int64{1, 2}, entries)
	d = e.Add(d, []int64{1}, pos[:1])
	got, _ = json.Marshal(d)
	want = `{"text_offset":[0,1,2],"token_logprobs":[null,-2,-0.5],"tokens":["a","b","a"],"top_logprobs":[null,{"b":-2,"c":-0.125},{"a":-0.5,"b":-1}]}`
	if string(got) != want {
		t.Errorf("echo logprobs\n got %s\nwant %s", got, want)
	}
	if _, err := Positions(&wire.LogprobsLists{LogprobTokenIDs: i32s(1, 2, 1, 2), Logprobs: f32s(1, 3, 0, 0, 0)}); err == nil {
		t.Error("mismatched shapes accepted")
	}
}
