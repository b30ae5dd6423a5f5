package dispatcher

import (
	"bytes"

	"github.com/switchyard-llm/switchyard/wire"
)

// origCopy is what a migrating request keeps of the request it was submitted with,
// so a move can build its continuation (migrate.go).
//
// Keeping the caller's *wire.EngineCoreRequest alive for the request's whole life
// cost about 1.3 KB per in-flight request (the request struct, its 680-byte
// SamplingParams and the prompt), which took `switchyard bench --inflight` from 447
// to 1,990 B per request when migration landed. Once the ADD is encoded, the copy
// is compacted to that encoding (native layout: sparse sampling params, packed
// token ids; a few hundred bytes), and decoded again only when the request moves,
// which is rare. Until then (and for P/D requests, which are sent elsewhere) req is
// the caller's request, as before. Guarded by the request's mu.
type origCopy struct {
	req *wire.EngineCoreRequest // the request as submitted; nil once compacted
	add []byte                  // its ADD body in the native layout, once compacted
	why string                  // unmovable(req), once compacted
}

// unmovable names what stops the request from being continued elsewhere, or "".
func (o *origCopy) unmovable() string {
	if o.req != nil {
		return unmovable(o.req)
	}
	return o.why
}

// request returns the request as submitted: the caller's own (not to be modified)
// or a fresh decoding of the compact copy. Only a move calls it.
func (o *origCopy) request() (*wire.EngineCoreRequest, error) {
	if o.req != nil {
		return o.req, nil
	}
	var req wire.EngineCoreRequest
	if err := wire.DecodeAdd([][]byte{o.add}, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// compact replaces the caller's request with its encoding. req is the request as
// admit encoded it, with sampling params sent (capped, maybe) and body, aux what
// lay encoded; sp is the caller's own sampling params. The already-encoded body is
// copied when it is the native encoding of the caller's request (the common case);
// otherwise the request is encoded again. A request that cannot move keeps only
// the reason. On an encoding failure the caller's request is kept.
func (o *origCopy) compact(req *wire.EngineCoreRequest, sp *wire.SamplingParams, lay *wire.Layout, body []byte, aux [][]byte) {
	if o.req != req {
		return // compacted by an earlier attempt, or a request of another path
	}
	if o.why = unmovable(req); o.why != "" {
		o.req = nil
		return
	}
	if len(aux) == 0 && lay == wire.Native() && req.Sampling == sp {
		o.add = bytes.Clone(body)
		o.req = nil
		return
	}
	tmp := *req
	tmp.Sampling = sp
	b, aux2, err := wire.AppendAdd(nil, &tmp)
	if err != nil || len(aux2) > 0 {
		return
	}
	o.add, o.req = b, nil
}
