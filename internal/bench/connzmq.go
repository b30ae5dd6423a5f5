package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// zmqConn speaks switchyard's msgpack client protocol over one DEALER: [type, body]
// out, EngineCoreOutputs (or an error map) back. The relay speaks the same framing, so
// the baseline and switchyard are driven by this one client code.
type zmqConn struct {
	lay   *wire.Layout // what the peer speaks: native for switchyard, the engines' for the relay
	sock  transport.Socket
	sink  sink
	typ   []byte
	buf   []byte
	wg    sync.WaitGroup
	errMu sync.Mutex
	err   error
}

func dialZMQ(ctx context.Context, net transport.Network, endpoint string, s sink, lay *wire.Layout) (*zmqConn, error) {
	sock, err := net.Dial(ctx, transport.Dealer, endpoint, transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: client dial %s: %w", endpoint, err)
	}
	c := &zmqConn{lay: lay, sock: sock, sink: s, typ: []byte{wire.RequestAdd}, buf: make([]byte, 0, 4096)}
	c.wg.Add(1)
	go c.recvLoop()
	return c, nil
}

// submit encodes and sends; it is called from the load's one sender goroutine, so
// the buffer is reused (the socket does not keep frames after Send returns).
func (c *zmqConn) submit(_ int64, req *wire.EngineCoreRequest) error {
	body, aux, err := c.lay.AppendAdd(c.buf[:0], req)
	if err != nil {
		return err
	}
	c.buf = body
	if len(aux) == 0 {
		return c.sock.Send(c.typ, body)
	}
	return c.sock.Send(append([][]byte{c.typ, body}, aux...)...)
}

func (c *zmqConn) recvLoop() {
	defer c.wg.Done()
	dec := wire.OutputsDecoder{Layout: c.lay}
	var outs wire.EngineCoreOutputs
	for {
		msg, err := c.sock.Recv()
		if err != nil {
			if !errors.Is(err, transport.ErrClosed) {
				c.errMu.Lock()
				c.err = err
				c.errMu.Unlock()
			}
			return
		}
		now := nowNS()
		if len(msg) == 0 || len(msg[0]) == 0 {
			continue
		}
		if b := msg[0][0]; b&0xf0 == 0x80 || b == 0xde || b == 0xdf {
			c.errorMsg(msg[0], now)
			continue
		}
		if err := dec.Decode(msg, &outs); err != nil {
			continue
		}
		for i := range outs.Outputs {
			o := &outs.Outputs[i]
			seq := seqOf(o.RequestID)
			if seq < 0 {
				continue
			}
			switch o.FinishReason {
			case wire.FinishAbort, wire.FinishError:
				c.sink.failed(seq, now)
			default:
				c.sink.output(seq, len(o.NewTokenIDs), o.Finished(), now)
			}
		}
	}
}

// errorMsg handles the client protocol's error map: the request it names failed.
func (c *zmqConn) errorMsg(body []byte, now int64) {
	var m map[string]any
	if err := msgpack.Unmarshal(body, &m); err != nil {
		return
	}
	id, _ := m["request_id"].(string)
	if seq := seqOf(id); seq >= 0 {
		c.sink.failed(seq, now)
	}
}

func (c *zmqConn) close() error {
	err := c.sock.Close()
	c.wg.Wait()
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err != nil {
		return c.err
	}
	return err
}
