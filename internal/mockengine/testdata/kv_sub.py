"""A libzmq subscriber of a mock engine's KV events, as a vLLM consumer runs one:
a SUB on the publisher's endpoint and a DEALER on its replay ROUTER.

Usage: kv_sub.py PUB_ENDPOINT REPLAY_ENDPOINT TOPIC

Events (JSON lines on stdout):
  {"event": "msg", "topic", "seq", "payload"}   every PUB message (payload hex)
  {"event": "replay", "seq", "payload"}          one replayed message
  {"event": "replay_end", "seq"}                 the end marker (seq as signed)
Commands (JSON lines on stdin):
  {"cmd": "replay", "start": N}                  [b"", N as 8 bytes big-endian]
  {"cmd": "exit"}
"""
import json
import os
import sys

import zmq


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    pub_ep, replay_ep, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
    sub.connect(pub_ep)
    replay = ctx.socket(zmq.DEALER)
    replay.connect(replay_ep)
    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    poller.register(replay, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    buf = b""
    while True:
        for sock, _ in poller.poll(1000):
            if sock is sub:
                t, seq, payload = sub.recv_multipart()
                emit(event="msg", topic=t.decode(), seq=int.from_bytes(seq, "big"), payload=payload.hex())
            elif sock is replay:
                empty, seq, payload = replay.recv_multipart()
                assert empty == b""
                n = int.from_bytes(seq, "big", signed=True)
                if n == -1:
                    assert payload == b""
                    emit(event="replay_end", seq=n)
                else:
                    emit(event="replay", seq=n, payload=payload.hex())
            else:
                data = os.read(0, 65536)
                if not data:
                    return
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    cmd = json.loads(line)
                    if cmd["cmd"] == "exit":
                        return
                    if cmd["cmd"] == "replay":
                        replay.send_multipart([b"", cmd["start"].to_bytes(8, "big")])


if __name__ == "__main__":
    main()
