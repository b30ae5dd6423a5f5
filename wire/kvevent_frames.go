package wire

// The ZeroMQ framing of vLLM's ZmqEventPublisher. Every PUB message is
// [topic, seq, payload] with seq 8 bytes big-endian, from 0 and +1 a message. Its
// replay ROUTER takes [b"", start] (start big-endian) and answers
// [b"", seq, payload] for every buffered message with seq >= start, then
// [b"", KVReplayEndSeq, b""].

import "encoding/binary"

// KVReplayEndSeq is the seq of the replay's end marker: -1 as 8 signed bytes.
const KVReplayEndSeq = ^uint64(0)

// kvSeqLen is the size of a seq frame.
const kvSeqLen = 8

// ParseKVEventMessage splits a PUB message into its three frames. The slices alias
// frames.
func ParseKVEventMessage(frames [][]byte) (topic []byte, seq uint64, payload []byte, err error) {
	const typ = "KVEventMessage"
	if len(frames) != 3 {
		return nil, 0, nil, &DecodeError{Type: typ, Msg: "expected 3 frames (topic, seq, payload), got " + itoa(len(frames))}
	}
	seq, ok := ParseKVSeq(frames[1])
	if !ok {
		return nil, 0, nil, &DecodeError{Type: typ, Field: "seq", Msg: "expected 8 bytes, got " + itoa(len(frames[1]))}
	}
	return frames[0], seq, frames[2], nil
}

// AppendKVSeq appends seq as 8 bytes big-endian.
func AppendKVSeq(dst []byte, seq uint64) []byte { return binary.BigEndian.AppendUint64(dst, seq) }

// ParseKVSeq reads an 8-byte big-endian seq frame.
func ParseKVSeq(b []byte) (uint64, bool) {
	if len(b) != kvSeqLen {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// ParseKVReplayReply reads one answer of the replay ROUTER: [seq, payload] as a REQ
// socket delivers it (the empty delimiter stripped) or [b"", seq, payload] as a
// DEALER does. end reports the end marker, after which no answer follows.
func ParseKVReplayReply(frames [][]byte) (seq uint64, payload []byte, end bool, err error) {
	const typ = "KVReplayReply"
	if len(frames) == 3 && len(frames[0]) == 0 {
		frames = frames[1:]
	}
	if len(frames) != 2 {
		return 0, nil, false, &DecodeError{Type: typ, Msg: "expected [seq, payload], got " + itoa(len(frames)) + " frames"}
	}
	seq, ok := ParseKVSeq(frames[0])
	if !ok {
		return 0, nil, false, &DecodeError{Type: typ, Field: "seq", Msg: "expected 8 bytes, got " + itoa(len(frames[0]))}
	}
	return seq, frames[1], seq == KVReplayEndSeq, nil
}

// ParseKVReplayRequest reads a replay request as the ROUTER sees it after the
// identity: [b"", start]. Like vLLM's int.from_bytes, it takes a start of any length;
// one beyond 64 bits is larger than any seq, so it reads as KVReplayEndSeq and
// replays nothing.
func ParseKVReplayRequest(frames [][]byte) (start uint64, err error) {
	if len(frames) != 2 || len(frames[0]) != 0 {
		return 0, &DecodeError{Type: "KVReplayRequest", Msg: "expected [b\"\", start], got " + itoa(len(frames)) + " frames"}
	}
	for _, c := range frames[1] {
		if start>>56 != 0 {
			return KVReplayEndSeq, nil
		}
		start = start<<8 | uint64(c)
	}
	return start, nil
}
