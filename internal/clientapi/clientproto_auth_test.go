package clientapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

func (h *clientHarness) auth(t *testing.T, token string) {
	t.Helper()
	b, _ := msgpack.Marshal(token)
	if err := h.cli.Send([]byte{RequestAuth}, b); err != nil {
		t.Fatal(err)
	}
}

// finish reads outputs until request id ends.
func (h *clientHarness) finish(t *testing.T, id string) {
	t.Helper()
	for {
		o := h.nextOutputs(t)
		if len(o.Outputs) != 1 || o.Outputs[0].RequestID != id {
			t.Fatalf("outputs %+v", o.Outputs)
		}
		if o.Outputs[0].Finished() {
			return
		}
	}
}

// With a token: ADD, ABORT and UTILITY before AUTH are refused with
// Unauthenticated (the UTILITY's call resolved) and reach no engine; the
// right token admits the connection, ADD sent right behind AUTH included.
func TestClientTokenRefusesUntilAuth(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Token: "s3cret"})
	h.add(t, "early", 3, wire.OptInt{})
	if e := h.nextError(t); e["type"] != ErrTypeUnauthenticated || !strings.Contains(e["message"].(string), "AUTH") {
		t.Errorf("ADD before AUTH: %v", e)
	}
	body, err := wire.AppendUtility(nil, 0, 42, "is_sleeping", wire.Raw{0x90})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send([]byte{wire.RequestUtility}, body); err != nil {
		t.Fatal(err)
	}
	o := h.nextOutputs(t)
	if o.UtilityOutput == nil || o.UtilityOutput.CallID != 42 || !strings.Contains(o.UtilityOutput.Failure.Value, "client token") {
		t.Errorf("UTILITY before AUTH: %+v", o.UtilityOutput)
	}
	if e := h.nextError(t); e["type"] != ErrTypeUnauthenticated {
		t.Errorf("UTILITY before AUTH: %v", e)
	}
	h.f.NoAdds(t)

	h.auth(t, "s3cret")
	h.add(t, "r1", 3, wire.OptInt{}) // pipelined behind AUTH
	h.finish(t, "r1")
	testwait.Recv(t, h.f.Adds, "the authenticated ADD")
	h.auth(t, "s3cret") // again: nothing changes, nothing is answered
	h.add(t, "r2", 2, wire.OptInt{})
	h.finish(t, "r2")
}

// A wrong token is refused, and the connection stays refused even with the
// right one after it (one guess per connection); a new connection may try
// again. An unauthenticated flood gets maxUnauthReplies answers, then none.
func TestClientTokenWrongAndFlood(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Token: "s3cret"})
	h.auth(t, "guess")
	if e := h.nextError(t); e["type"] != ErrTypeUnauthenticated || !strings.Contains(e["message"].(string), "wrong client token") {
		t.Errorf("wrong token: %v", e)
	}
	h.auth(t, "s3cret")
	h.add(t, "after-wrong", 3, wire.OptInt{})
	if e := h.nextError(t); e["type"] != ErrTypeUnauthenticated || !strings.Contains(e["message"].(string), "reconnect") {
		t.Errorf("ADD after a wrong token: %v", e)
	}
	for range 100 {
		h.add(t, "flood", 3, wire.OptInt{})
	}
	// Two answered so far; the flood gets the rest of maxUnauthReplies.
	for range maxUnauthReplies - 2 {
		if e := h.nextError(t); e["type"] != ErrTypeUnauthenticated {
			t.Fatalf("flood: %v", e)
		}
	}
	select {
	case m := <-h.in:
		t.Fatalf("answer past maxUnauthReplies: % x", m[0])
	case <-time.After(200 * time.Millisecond):
	}
	h.f.NoAdds(t)

	// A new connection, the right token.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := transport.Dial(ctx, transport.Dealer, h.cs.Addr(), transport.Options{Identity: []byte("client-2")})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	tok, _ := msgpack.Marshal("s3cret")
	if err := cli.Send([]byte{RequestAuth}, tok); err != nil {
		t.Fatal(err)
	}
	if err := cli.Send([]byte{wire.RequestAbort}, wire.AppendAbort(nil, nil)); err != nil {
		t.Fatal(err)
	}
	got, err := testwait.Result(t, "an answer on the new connection", func() ([][]byte, error) {
		sp := wire.DefaultSamplingParams()
		sp.MaxTokens = wire.SomeInt(2)
		sp.IgnoreEOS = true
		sp.Normalize()
		body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: "new", PromptTokenIDs: []int64{1}, Sampling: &sp})
		if err != nil {
			return nil, err
		}
		if err := cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
			return nil, err
		}
		return cli.Recv()
	})
	if err != nil {
		t.Fatal(err)
	}
	var o wire.EngineCoreOutputs
	if err := wire.DecodeOutputs(got, &o); err != nil || o.Outputs[0].RequestID != "new" {
		t.Fatalf("new connection with the right token: %v % x", err, got[0])
	}
}

// Without a token an AUTH is accepted and changes nothing.
func TestClientAuthWithoutToken(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.auth(t, "anything")
	h.add(t, "r1", 2, wire.OptInt{})
	h.finish(t, "r1")
}

func TestMsgpackBytes(t *testing.T) {
	for _, s := range []string{"", "x", strings.Repeat("y", 31), strings.Repeat("z", 200), strings.Repeat("w", 70000)} {
		b, _ := msgpack.Marshal(s)
		got, ok := msgpackBytes(b)
		if !ok || string(got) != s {
			t.Errorf("str of %d: %v %d", len(s), ok, len(got))
		}
		b, _ = msgpack.Marshal([]byte(s))
		if got, ok := msgpackBytes(b); !ok || string(got) != s {
			t.Errorf("bin of %d: %v", len(s), ok)
		}
	}
	for _, b := range [][]byte{nil, {0xc0}, {0xa3, 'a'}, {0xd9}, {0x92, 0xa1, 'a', 0xa1, 'b'}} {
		if _, ok := msgpackBytes(b); ok {
			t.Errorf("% x accepted", b)
		}
	}
}
