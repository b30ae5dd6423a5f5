package transport

// PUB/XPUB fan-out and XSUB/SUB subscriptions: each subscriber has its own bounded
// queue and writer, so one stalled subscriber never holds up the others.

import (
	"bytes"
	"fmt"
	"slices"
)

// subscription is one live XSUB/SUB subscription: the "\x01topic" message and how
// many times it was subscribed (libzmq's XSUB counts them, and forwards an
// unsubscribe only when the count drops to zero).
type subscription struct {
	msg []byte
	n   int
}

// pubWriter is a PUB/XPUB subscriber's writer: it sends what queued for that
// subscriber, up to 64 messages per writev, so a subscriber that stops reading
// delays only its own queue. A write that fails or outlasts SendTimeout closes the
// connection (the reader then reports the peer gone).
func (s *socket) pubWriter(p *peer) {
	defer s.wg.Done()
	batch := make([][][]byte, 0, 64)
	for {
		select {
		case m := <-p.outq:
			batch = append(batch[:0], m)
		more:
			for len(batch) < cap(batch) {
				select {
				case m := <-p.outq:
					batch = append(batch, m)
				default:
					break more
				}
			}
			err := p.c.writeMany(batch, 0, s.opt.SendTimeout)
			clear(batch)
			if err != nil {
				p.c.close()
				s.opt.Logger.Warn("transport: dropped subscriber", "addr", s.addr, "identity", fmt.Sprintf("%x", p.id), "err", err)
				return
			}
		case <-p.quit:
			return
		}
	}
}

func isSubscription(frames [][]byte) bool {
	return len(frames) == 1 && len(frames[0]) > 0 && (frames[0][0] == 0 || frames[0][0] == 1)
}

func (p *peer) setTopic(sub []byte) {
	topic := append([]byte(nil), sub[1:]...)
	p.tmu.Lock()
	defer p.tmu.Unlock()
	for i, t := range p.topics {
		if bytes.Equal(t, topic) {
			if sub[0] == 0 {
				p.topics = append(p.topics[:i], p.topics[i+1:]...)
			}
			return
		}
	}
	if sub[0] == 1 {
		p.topics = append(p.topics, topic)
	}
}

func (p *peer) subscribed(msg []byte) bool {
	p.tmu.Lock()
	defer p.tmu.Unlock()
	for _, t := range p.topics {
		if bytes.HasPrefix(msg, t) {
			return true
		}
	}
	return false
}

// subscribeLocked applies an XSUB/SUB (un)subscription to the live set and reports
// whether to forward it: a subscription always (XPUB_VERBOSE peers count them), an
// unsubscribe only when it removes the topic's last subscription. s.mu must be held.
func (s *socket) subscribeLocked(msg []byte) bool {
	topic := msg[1:]
	i := slices.IndexFunc(s.subs, func(sub subscription) bool { return bytes.Equal(sub.msg[1:], topic) })
	if msg[0] == 1 {
		if i >= 0 {
			s.subs[i].n++
		} else {
			s.subs = append(s.subs, subscription{msg: append([]byte{1}, topic...), n: 1})
		}
		return true
	}
	if i < 0 {
		return false
	}
	if s.subs[i].n--; s.subs[i].n > 0 {
		return false
	}
	s.subs = slices.Delete(s.subs, i, i+1)
	return true
}
