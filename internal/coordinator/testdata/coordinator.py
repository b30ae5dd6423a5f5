"""Stands in for vLLM's DP coordinator front publisher, for external-mode tests.

usage: coordinator.py BIND_ENDPOINT   (tcp://127.0.0.1:* or ipc://PATH)

Binds an XPUB with XPUB_VERBOSE like vLLM's coordinator, reports the bound
address, waits for a frontend's subscription, then publishes what stdin asks
and reports every FIRST_REQ it receives.

stdin: {"cmd": "publish", "counts": [[w, r, kv], ...] or null, "wave": N, "running": B}
       {"cmd": "exit"}
stdout: {"event": "bound", "address": A}
        {"event": "subscribed"}
        {"event": "first_req", "engine": HEX or INT, "wave": N}
"""
import sys

import msgpack
import zmq

from jsonlines_peer import Lines, emit


def main():
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.XPUB_VERBOSE, 1)
    pub.bind(sys.argv[1])
    emit(event="bound", address=pub.getsockopt(zmq.LAST_ENDPOINT).decode())
    poller = zmq.Poller()
    poller.register(pub, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    stdin = Lines()
    while True:
        for sock, _ in poller.poll():
            if sock is pub:
                buf = pub.recv()
                if buf == b"\x01":
                    emit(event="subscribed")
                    continue
                if buf == b"\x00":
                    continue
                engine, wave = msgpack.unpackb(buf, raw=False)
                if isinstance(engine, bytes):
                    engine = engine.hex()
                emit(event="first_req", engine=engine, wave=wave)
                continue
            cmds = stdin.read()
            if cmds is None:
                return
            for cmd in cmds:
                if cmd["cmd"] == "publish":
                    counts = cmd["counts"]
                    if counts is not None:
                        counts = [[c[0], c[1], float(c[2])] for c in counts]
                    pub.send(msgpack.packb([counts, cmd["wave"], cmd["running"]], use_bin_type=True))
                elif cmd["cmd"] == "exit":
                    pub.close(linger=0)
                    ctx.term()
                    return

if __name__ == "__main__":
    main()
