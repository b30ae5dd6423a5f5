package mockengine

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
)

// A send socket whose peer went away queues what it is given and sends it, in
// order, on the next connection, as a libzmq PUSH does: a restarted frontend
// gets the outputs sent while it was down, instead of losing the first ones.
func TestRedialQueuesWhilePeerAway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := "ipc://" + filepath.Join(t.TempDir(), "out")
	pull, err := transport.ZMQ.Listen(ctx, transport.Pull, addr, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dialRedial(ctx, transport.ZMQ, transport.Push, addr, transport.Options{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Send([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if f, err := recvFrames(t, pull, "the first message"); err != nil || string(f[0]) != "hello" {
		t.Fatalf("first message: %q, %v", f, err)
	}
	pull.Close()
	// A send socket learns of the loss from a failed send: probe until it has.
	for {
		r.mu.Lock()
		away := r.cur == nil
		r.mu.Unlock()
		if away {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the loss was never noticed")
		}
		r.Send([]byte("probe"))
		time.Sleep(5 * time.Millisecond)
	}
	want := []string{"x", "y", "z"}
	for _, m := range want {
		if err := r.Send([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	pull, err = transport.ZMQ.Listen(ctx, transport.Pull, addr, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	// Once reconnected, a last message: it must come after what was queued.
	for {
		r.mu.Lock()
		back := r.cur != nil
		r.mu.Unlock()
		if back {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("never reconnected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.Send([]byte("end")); err != nil {
		t.Fatal(err)
	}
	var got []string // probes sent after the loss was noticed may come first
	for len(got) == 0 || got[len(got)-1] != "end" {
		f, err := recvFrames(t, pull, "the queued messages and end")
		if err != nil {
			t.Fatal(err)
		}
		if s := string(f[0]); s != "probe" {
			got = append(got, s)
		}
	}
	if want := append(want, "end"); !slices.Equal(got, want) {
		t.Fatalf("after the reconnection: %q, want %q", got, want)
	}
}
