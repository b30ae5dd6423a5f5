"""The client protocol's --client-token, seen from pyzmq.

Usage: client_auth.py ENDPOINT TOKEN. A client authenticates by sending
[AUTH (0x10), msgpack token] first on its connection; ZeroMQ keeps a connection's
messages in order, so its first ADD may follow at once. Prints one JSON object
with what each connection saw; every receive has a timeout.
"""

import json
import sys
import time

import msgpack
import zmq

ADD, AUTH = b"\x00", b"\x10"


def request(req_id, max_tokens):
    sampling = {"max_tokens": max_tokens, "ignore_eos": True}
    return msgpack.packb([req_id, [1, 2, 3], None, sampling, None, time.time(), None, None, None])


def recv(sock, timeout_ms=5000):
    if not sock.poll(timeout_ms):
        raise TimeoutError("no message from switchyard")
    msg = msgpack.unpackb(sock.recv_multipart()[0], raw=False, strict_map_key=False)
    return ("error", msg) if isinstance(msg, dict) else ("outputs", msg)


def connect(ctx, endpoint):
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


def tokens_of(sock, req_id):
    n = 0
    while True:
        kind, msg = recv(sock)
        if kind == "error":
            return {"error": msg}
        for out in msg[1]:
            n += len(out[1])
            if len(out) > 5 and out[5] is not None:
                return {"tokens": n, "finish": out[5]}


def main():
    endpoint, token = sys.argv[1], sys.argv[2]
    ctx = zmq.Context()
    result = {}

    # 1. No AUTH: the ADD is refused.
    sock = connect(ctx, endpoint)
    sock.send_multipart([ADD, request("anon", 4)])
    result["anonymous"] = recv(sock)[1]
    sock.close()

    # 2. A wrong token, then an ADD: both refused.
    sock = connect(ctx, endpoint)
    sock.send_multipart([AUTH, msgpack.packb("not-" + token)])
    result["wrong_auth"] = recv(sock)[1]
    sock.send_multipart([ADD, request("wrong", 4)])
    result["wrong_add"] = recv(sock)[1]
    sock.close()

    # 3. The token, and the ADD right behind it: served.
    sock = connect(ctx, endpoint)
    sock.send_multipart([AUTH, msgpack.packb(token)])
    sock.send_multipart([ADD, request("ok", 5)])
    result["authenticated"] = tokens_of(sock, "ok")
    sock.close()

    ctx.term()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
