"""A minimal vLLM-style frontend written against libzmq (pyzmq) and python3-msgpack:
binds the handshake ROUTER (tcp, port 0), the input ROUTER and output PULL (ENGINE
transport: tcp or ipc), runs HELLO/INIT/registration/READY with one engine, sends
two ADDs shaped as msgspec writes them and an is_sleeping UTILITY, and prints one JSON
line with what came back. Used by interop_test.go to drive switchyard's mock engine.

usage: py_frontend.py tcp|ipc IPC_DIR
"""
import json
import os
import sys
import time

import msgpack
import zmq

transport, ipc_dir = sys.argv[1], sys.argv[2]
ctx = zmq.Context()


def bind(kind, name):
    s = ctx.socket(kind)
    if transport == "ipc":
        s.bind("ipc://" + os.path.join(ipc_dir, name))
    else:
        s.bind("tcp://127.0.0.1:*")
    return s, s.getsockopt(zmq.LAST_ENDPOINT).decode()


inp, in_addr = bind(zmq.ROUTER, "in")
out, out_addr = bind(zmq.PULL, "out")
hs = ctx.socket(zmq.ROUTER)
hs.bind("tcp://127.0.0.1:*")
print(hs.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)


def recv(sock, what, timeout=20000):
    if not sock.poll(timeout):
        sys.exit("timed out waiting for " + what)
    return sock.recv_multipart()


ident, hello = recv(hs, "HELLO")
hello = msgpack.unpackb(hello, raw=False)
assert hello["status"] == "HELLO", hello
init = {"addresses": {"inputs": [in_addr], "outputs": [out_addr], "coordinator_input": None,
                      "coordinator_output": None, "frontend_stats_publish_address": None},
        "parallel_config": {}}
hs.send_multipart([ident, msgpack.packb(init)])
reg_ident, reg = recv(inp, "registration")
assert reg_ident == ident, (reg_ident, ident)
reg = msgpack.unpackb(reg, raw=False)
rid, ready = recv(hs, "READY")
assert msgpack.unpackb(ready, raw=False)["status"] == "READY"

sp = {"max_tokens": 6, "_eos_token_id": 2, "_all_stop_token_ids": [2], "stop": [], "stop_token_ids": [],
      "output_kind": 1}
for req_id in ("py-a", "py-b"):
    # 17 elements, as a Python frontend shapes it (engine-protocol 7.2).
    add = [req_id, [1, 2, 3], None, sp, None, time.time(), None, None, None,
           None, None, 0, 0, 0, None, False, req_id]
    inp.send_multipart([ident, b"\x00", msgpack.packb(add)])
inp.send_multipart([ident, b"\x03", msgpack.packb([0, 7, "is_sleeping", []])])

tokens, finish, utility, stats_seen = {}, {}, None, False
while len(finish) < 2 or utility is None:
    frames = recv(out, "outputs")
    msg = msgpack.unpackb(frames[0], raw=False)
    assert msg[0] == int.from_bytes(ident, "little"), msg
    for o in msg[1]:
        tokens.setdefault(o[0], []).extend(o[1])
        if len(o) > 5 and o[5] is not None:
            finish[o[0]] = o[5]
    if msg[2] is not None:
        stats_seen = "num_running_reqs" in msg[2]
    if len(msg) > 4 and msg[4] is not None:
        utility = msg[4]
print(json.dumps({"tokens": tokens, "finish": finish, "utility": utility, "stats": stats_seen,
                  "rank": reg.get("data_parallel_rank"), "max_model_len": reg.get("max_model_len")}), flush=True)
