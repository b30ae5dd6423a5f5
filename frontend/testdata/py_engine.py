"""A vLLM-style engine core written against libzmq (pyzmq) and python3-msgpack,
following engine-protocol.md sections 2-4, used by interop_test.go.

usage: py_engine.py HANDSHAKE_ADDRESS RANK DIE_AFTER_STEPS

Tokens: request r's i-th token (0-based) is 1000 + i. Every output carries a
routed_experts ndarray big enough to travel as an aux frame (vLLM sends buffers of
256 B or more out of band): 300 B for even output positions, 70 KiB for odd ones,
filled with byte (step + position) & 0xff, so step messages are multipart.

It answers UTILITY "disconnects" with the number of DISCONNECTED events its input
and output sockets saw, which proves ZMTP heartbeats (enabled on both, every 10 ms
on the outputs, so PINGs land between the frames of multipart outputs) are answered
by switchyard's transport.
After DIE_AFTER_STEPS steps (0 = never) it sends ENGINE_CORE_DEAD and exits 1.
"""
import sys
import time

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

hs_addr, rank, die_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ident = rank.to_bytes(2, "little")
ctx = zmq.Context()


def heartbeat(s, ivl=100):
    s.setsockopt(zmq.HEARTBEAT_IVL, ivl)
    # A generous timeout: a missing PONG still drops the connection within the test,
    # but a 2-core machine under load may take a few hundred ms to schedule the reply.
    s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 1500)


hs = ctx.socket(zmq.DEALER)
hs.setsockopt(zmq.IDENTITY, ident)
hs.setsockopt(zmq.LINGER, 5000)
heartbeat(hs)
hs.connect(hs_addr)
hs.send(msgpack.packb({"status": "HELLO", "local": False, "headless": True}))
if not hs.poll(20000):
    sys.exit("no INIT within 20 s")
init = msgpack.unpackb(hs.recv(), raw=False)
addrs = init["addresses"]
assert init["parallel_config"] == {}, init

outs = []
monitors = []
for a in addrs["outputs"]:
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.LINGER, 4000)
    heartbeat(s, 10)
    monitors.append(s.get_monitor_socket(zmq.EVENT_DISCONNECTED))
    s.connect(a)
    outs.append(s)
ins = []
reg = {"max_model_len": 2048, "num_gpu_blocks": 100, "dp_stats_address": None,
       "block_size": 16, "dtype": "bfloat16", "vllm_version": "py-interop",
       "data_parallel_rank": rank, "future_key_we_do_not_know": [1, 2]}
for a in addrs["inputs"]:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, ident)
    heartbeat(s)
    monitors.append(s.get_monitor_socket(zmq.EVENT_DISCONNECTED))
    s.connect(a)
    s.send(msgpack.packb(reg))
    ins.append(s)
hs.send(msgpack.packb({"status": "READY", "local": False, "headless": True}))
hs.close(linger=5000)

poller = zmq.Poller()
for s in ins + monitors:
    poller.register(s, zmq.POLLIN)
running = {}
disconnects = 0
steps = 0
last_step = time.monotonic()
while True:
    events = dict(poller.poll(5 if running else 200))
    for m in monitors:
        if m in events:
            recv_monitor_message(m)
            disconnects += 1
    for s in ins:
        if s not in events:
            continue
        frames = s.recv_multipart()
        typ, body = frames[0], msgpack.unpackb(frames[1], raw=False)
        if typ == b"\x00":
            assert len(body) >= 9, body
            running[body[0]] = [body[3].get("max_tokens", 16), 0, body[11] if len(body) > 11 else 0]
        elif typ == b"\x01":
            for rid in body:
                running.pop(rid, None)
        elif typ == b"\x03":
            client, call_id, method, args = body
            result = [None, disconnects] if method == "disconnects" else [None, False]
            outs[client].send(msgpack.packb([rank, [], None, time.monotonic(), [call_id, None, result]]))
        else:
            sys.exit("unexpected request type %r" % typ)
    if running and time.monotonic() - last_step >= 0.005:
        last_step = time.monotonic()
        steps += 1
        if die_after and steps > die_after:
            for o in outs:
                o.send(b"ENGINE_CORE_DEAD")
            time.sleep(0.5)
            sys.exit(1)
        outputs = []
        aux = []
        for pos, (rid, st) in enumerate(list(running.items())):
            tok = 1000 + st[1]
            st[1] += 1
            # routed_experts (index 12) as a numpy-style ndarray whose data is an
            # aux frame index (frame 0 is the body).
            n = 75 if pos % 2 == 0 else 17920
            aux.append(bytes([(steps + pos) & 0xff]) * (4 * n))
            experts = ["<i4", [n], len(aux)]
            finish = None
            if st[1] >= st[0]:
                finish = 1
                del running[rid]
            outputs.append([rid, [tok], None, None, None, finish, None, None, None, None, None, None, experts])
        stats = {"num_running_reqs": len(running), "num_waiting_reqs": 0, "step_counter": steps,
                 "current_wave": 0, "kv_cache_usage": 0.0, "prefix_cache_stats": None}
        outs[0].send_multipart([msgpack.packb([rank, outputs, stats, time.monotonic()])] + aux, copy=False)
