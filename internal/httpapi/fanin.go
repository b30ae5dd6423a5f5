package httpapi

import (
	"context"
	"errors"
	"io"

	"github.com/switchyard-llm/switchyard/dispatcher"
)

// event is one output (or the terminal error) of choice `choice`.
type event struct {
	choice int
	out    dispatcher.Output
	err    error
}

// fanIn merges the streams of one HTTP completion into one sequence of events. The
// common case, one stream, reads it directly; n > 1 (or several prompts) runs one
// forwarding goroutine per stream, bounded by MaxChoices and ended by ctx, because a
// Stream only offers a blocking Recv.
type fanIn struct {
	streams []*dispatcher.Stream
	ch      chan event
}

func newFanIn(ctx context.Context, streams []*dispatcher.Stream) *fanIn {
	f := &fanIn{streams: streams}
	if len(streams) <= 1 {
		return f
	}
	f.ch = make(chan event, len(streams))
	for i, s := range streams {
		go func() {
			for {
				out, err := s.Recv(ctx)
				if errors.Is(err, io.EOF) {
					return
				}
				select {
				case f.ch <- event{choice: i, out: out, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return f
}

// next returns the next event; a context error means the caller is gone. The caller
// stops calling once every choice has ended (a final output or an error).
func (f *fanIn) next(ctx context.Context) (event, error) {
	if f.ch == nil {
		out, err := f.streams[0].Recv(ctx)
		if err != nil && ctx.Err() != nil {
			return event{}, ctx.Err()
		}
		return event{out: out, err: err}, nil
	}
	select {
	case ev := <-f.ch:
		if ev.err != nil && ctx.Err() != nil {
			return event{}, ctx.Err()
		}
		return ev, nil
	case <-ctx.Done():
		return event{}, ctx.Err()
	}
}
