package wire_test

import (
	"errors"
	"fmt"

	"github.com/switchyard-llm/switchyard/wire"
)

// newRequest builds an ADD the way a frontend does: vLLM's default sampling
// params, the model's EOS id, vLLM's post-init (Prepare), then Validate.
func newRequest(id string, prompt []int64) (*wire.EngineCoreRequest, error) {
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(8)
	sp.SetEOS(wire.SomeInt(2))
	if err := sp.Prepare(); err != nil {
		return nil, err
	}
	req := &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: prompt, Sampling: &sp}
	return req, req.Validate()
}

// An ADD encoded in the native layout and decoded back, as an engine would read it.
// The body is appended to a pooled buffer; aux holds the frames of large tensors
// (none here) that go on the socket after it.
func ExampleAppendAdd() {
	req, err := newRequest("req-1", []int64{1, 15043, 3186})
	if err != nil {
		fmt.Println(err)
		return
	}
	body, aux, err := wire.AppendAdd(wire.GetBuffer(), req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wire.PutBuffer(body) // after the frames are written (and no longer read)

	frames := append([][]byte{body}, aux...)
	var got wire.EngineCoreRequest
	if err := wire.DecodeAdd(frames, &got); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("id:", got.RequestID)
	fmt.Println("prompt:", got.PromptTokenIDs)
	fmt.Println("max_tokens:", got.Sampling.MaxTokens.Value)
	fmt.Println("eos:", got.Sampling.EOSTokenID.Value)
	fmt.Println("aux frames:", len(aux))
	// Output:
	// id: req-1
	// prompt: [1 15043 3186]
	// max_tokens: 8
	// eos: 2
	// aux frames: 0
}

// An engine placed on an older release's layout gets its ADDs in that layout: the
// same request, other field positions: before 0.18 the EOS id travelled in the
// request itself, from 0.18 in SamplingParams, and the newest layout adds fields.
func ExampleLayout() {
	req, err := newRequest("req-2", []int64{1, 887})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"v0.15", "v0.18"} {
		lay := wire.BuiltinLayout(name)
		body, aux, err := lay.AppendAdd(nil, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var got wire.EngineCoreRequest
		if err := lay.DecodeAdd(append([][]byte{body}, aux...), &got); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d request fields, eos in request %v, decoded %s eos %d\n",
			lay, len(lay.Request), lay.EOSInRequest(), got.RequestID, got.Sampling.EOSTokenID.Value)
	}
	fmt.Println("native:", wire.Native(), len(wire.Native().Request), "request fields")
	// Output:
	// v0.15: 17 request fields, eos in request true, decoded req-2 eos 2
	// v0.18: 17 request fields, eos in request false, decoded req-2 eos 2
	// native: newest 22 request fields
}

// One engine step: two requests' new tokens, the second one finished. An engine's
// receive loop keeps one OutputsDecoder (with the engine's Layout) and one
// EngineCoreOutputs and reuses both for every message.
func ExampleOutputsDecoder() {
	step := &wire.EngineCoreOutputs{
		Outputs: []wire.EngineCoreOutput{
			{RequestID: "req-1", NewTokenIDs: []int64{450}, FinishReason: wire.FinishNone},
			{RequestID: "req-2", NewTokenIDs: []int64{13, 2}, FinishReason: wire.FinishStop},
		},
		Timestamp: 12.5,
	}
	body, aux, err := wire.AppendOutputs(nil, step)
	if err != nil {
		fmt.Println(err)
		return
	}

	dec := wire.OutputsDecoder{Layout: wire.Native()}
	var outs wire.EngineCoreOutputs
	if err := dec.Decode(append([][]byte{body}, aux...), &outs); err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outs.Outputs {
		// o.NewTokenIDs shares one array with the message's other entries and
		// o.RequestID one string: clone them to keep them past the next Decode.
		if o.Finished() {
			fmt.Printf("%s: tokens %v, finished: %s\n", o.RequestID, o.NewTokenIDs, o.FinishReason)
		} else {
			fmt.Printf("%s: tokens %v\n", o.RequestID, o.NewTokenIDs)
		}
	}
	// Output:
	// req-1: tokens [450]
	// req-2: tokens [13 2], finished: stop
}

// Decoders never panic: whatever the bytes, a malformed message is a *DecodeError
// naming the type, field and offset.
func ExampleDecodeError() {
	// [0, "x"]: engine_index 0, then a string where the outputs array belongs.
	var outs wire.EngineCoreOutputs
	err := wire.DecodeOutputs([][]byte{{0x92, 0x00, 0xa1, 'x'}}, &outs)
	var de *wire.DecodeError
	if errors.As(err, &de) {
		fmt.Printf("type %s, field %s, offset %d: %s\n", de.Type, de.Field, de.Offset, de.Msg)
	}
	fmt.Println(err)
	// Output:
	// type EngineCoreOutputs, field outputs, offset 2: expected array, got str
	// wire: EngineCoreOutputs.outputs: expected array, got str
}
