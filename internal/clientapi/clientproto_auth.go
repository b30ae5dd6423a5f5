package clientapi

// Client-protocol authentication (--client-token). A client sends
// [AUTH (0x10), msgpack str or bin: the token] once per connection, before
// anything else; ZeroMQ delivers a connection's messages in order, so it may
// send its first ADD right behind it without waiting. A connection that has
// not presented the token is served nothing: each of its requests is refused
// with an Unauthenticated error (a UTILITY's call is resolved as failed),
// nothing is decoded past the type byte and nothing reaches an engine. A
// wrong token closes the door for that connection (one guess per
// connection), and after maxUnauthReplies refusals it gets no more replies,
// so a flood from a connection that does not read queues nothing.

import (
	"crypto/subtle"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// RequestAuth is the AUTH type byte: outside vLLM's request types (0x00 to
// 0x05), which an engine's input thread parses.
const RequestAuth byte = 0x10

// ErrTypeUnauthenticated refuses a request from a connection that has not
// presented the client token, and a wrong token.
const ErrTypeUnauthenticated = "Unauthenticated"

// maxUnauthReplies bounds the error replies one unauthenticated connection
// gets: later messages are dropped without one.
const maxUnauthReplies = 8

// authState is one connection's standing, by identity. Only the
// connection's own reader touches its fields (handle runs in order per
// connection); the map is guarded by ClientServer.mu.
type authState struct {
	ok, failed bool
	refused    int
}

// authLog rate-limits the warning about wrong tokens to one a second.
type authLog struct {
	last       atomic.Int64 // unix nanoseconds of the last warning
	suppressed atomic.Int64
}

// admit reports whether the message may be served: true for an
// authenticated connection (or when no token is configured), false once
// the message was handled here (an AUTH, or a refusal).
func (s *ClientServer) admit(c *client, frames [][]byte) bool {
	if s.cfg.Token == "" {
		return true
	}
	typ := byte(0xff)
	if len(frames) >= 2 && len(frames[1]) == 1 {
		typ = frames[1][0]
	}
	s.mu.Lock()
	st := s.auth[string(c.id)]
	if st == nil {
		st = &authState{}
		s.auth[string(c.id)] = st
	}
	s.mu.Unlock()
	switch {
	case st.ok:
		return typ != RequestAuth // a repeated AUTH changes nothing
	case typ == RequestAuth && !st.failed:
		var tok []byte
		if len(frames) >= 3 {
			tok, _ = msgpackBytes(frames[2])
		}
		if subtle.ConstantTimeCompare(tok, []byte(s.cfg.Token)) == 1 {
			st.ok = true
			return false
		}
		st.failed = true
		s.warnAuth(c)
		s.refuse(c, st, typ, frames, "AUTH: wrong client token; this connection stays unauthenticated (reconnect to try again)")
		return false
	}
	msg := "the client protocol requires the client token: send [AUTH (0x10), token] first on each connection"
	if st.failed {
		msg = "a wrong client token was presented on this connection: reconnect and send the right one"
	}
	s.refuse(c, st, typ, frames, msg)
	return false
}

// refuse answers an unauthenticated message, up to maxUnauthReplies times
// per connection.
func (s *ClientServer) refuse(c *client, st *authState, typ byte, frames [][]byte, msg string) {
	if st.refused >= maxUnauthReplies {
		return
	}
	st.refused++
	if typ == wire.RequestUtility && len(frames) >= 3 {
		// Resolve the pending call, as for any refused UTILITY.
		if id, neg, ok := utilityCallID(frames[2]); ok && !neg {
			s.replyUtility(c, id, 0, "Call failed: "+msg, nil)
		}
	}
	s.sendError(c, "", ErrTypeUnauthenticated, msg, nil)
}

// forgetAuth drops a departed connection's standing: a new connection with
// the same identity starts unauthenticated. Called before the transport
// frees the identity (the departure is handled first).
func (s *ClientServer) forgetAuth(id []byte) {
	if s.cfg.Token == "" {
		return
	}
	s.mu.Lock()
	delete(s.auth, string(id))
	s.mu.Unlock()
}

func (s *ClientServer) warnAuth(c *client) {
	now := time.Now().UnixNano()
	last := s.authLog.last.Load()
	if now-last < int64(time.Second) || !s.authLog.last.CompareAndSwap(last, now) {
		s.authLog.suppressed.Add(1)
		return
	}
	s.log.Warn("client protocol: wrong client token", "client", c.idHex, "suppressed_since_last_warning", s.authLog.suppressed.Swap(0))
}

// msgpackBytes reads a msgpack str or bin that is the whole of b.
func msgpackBytes(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	var n, hdr int
	switch t := b[0]; {
	case t >= 0xa0 && t <= 0xbf:
		n, hdr = int(t&0x1f), 1
	case (t == 0xd9 || t == 0xc4) && len(b) >= 2:
		n, hdr = int(b[1]), 2
	case (t == 0xda || t == 0xc5) && len(b) >= 3:
		n, hdr = int(binary.BigEndian.Uint16(b[1:])), 3
	case (t == 0xdb || t == 0xc6) && len(b) >= 5:
		n, hdr = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, false
	}
	if len(b)-hdr != n {
		return nil, false
	}
	return b[hdr:], true
}
