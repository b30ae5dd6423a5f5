"""A vLLM-style engine core written against libzmq (pyzmq) and python3-msgpack,
following engine-protocol.md sections 2-4, used by interop_test.go.

usage: py_engine.py HANDSHAKE_ADDRESS RANK DIE_AFTER_STEPS [LAYOUT_JSON]

LAYOUT_JSON (default ../wire/layouts/newest.json) is a switchyard layout file: the
engine speaks that vLLM release's wire layout, built from the field names alone
(registration keys, READY keys, request and output field positions), and answers
UTILITY calls for the EngineCore methods the layout's probe table says it has,
failing others the way vLLM's getattr does.

Tokens: request r's i-th token (0-based) is 1000 + i. Every output carries a
routed_experts ndarray big enough to travel as an aux frame (vLLM sends buffers of
256 B or more out of band): 300 B for even output positions, 70 KiB for odd ones,
filled with byte (step + position) & 0xff, so step messages are multipart.

It answers UTILITY "disconnects" with the number of DISCONNECTED events its input
and output sockets saw, which proves ZMTP heartbeats (enabled on both, every 10 ms
on the outputs, so PINGs land between the frames of multipart outputs) are answered
by switchyard's transport.
After DIE_AFTER_STEPS steps (0 = never) it sends ENGINE_CORE_DEAD and exits 1.

LoRA, where the layout lists LoRARequest's fields: add_lora's argument and an ADD's
lora_request are read as msgspec reads vLLM's array_like LoRARequest (positional,
lora_name and lora_int_id required, each field's type, then __post_init__'s checks);
add_lora answers the decoded struct as a map (vLLM answers True), and a LoRA request's
i-th token is 1000 * (1 + lora_int_id) + i.
"""
import json
import sys
import time

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

hs_addr, rank, die_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
layout = json.load(open(sys.argv[4] if len(sys.argv) > 4 else "../wire/layouts/newest.json"))
req_idx = {n: i for i, n in enumerate(layout["structs"]["EngineCoreRequest"]["fields"])}
out_fields = layout["structs"]["EngineCoreOutput"]["fields"]
out_idx = {n: i for i, n in enumerate(out_fields)}
methods = set(layout["probe"]["has"]) | {"disconnects", "is_sleeping", "add_lora"}
lora_fields = layout["structs"].get("LoRARequest", {}).get("fields")
NONE = type(None)
LORA_TYPES = {"lora_name": str, "lora_int_id": int, "lora_path": str, "base_model_name": (str, NONE),
              "tensorizer_config_dict": (dict, NONE), "load_inplace": bool, "is_3d_lora_weight": bool,
              "lora_local_path": (str, NONE), "long_lora_max_len": (int, NONE)}


def lora_request(v):
    """v as msgspec decodes an array_like LoRARequest of this release, or ValueError."""
    if lora_fields is None:
        raise ValueError("this release's LoRARequest fields are unknown")
    if not isinstance(v, list) or len(v) < 2:
        raise ValueError("Expected `array` of length >= 2, got %r" % (v,))
    d = {}
    for name, x in zip(lora_fields, v):  # extra trailing items are ignored
        t = LORA_TYPES[name]
        if (isinstance(x, bool) and t is int) or not isinstance(x, t):
            raise ValueError("Expected `%s`, got %r - at `$[%s]`" % (t, x, name))
        d[name] = x
    if d["lora_int_id"] < 1:
        raise ValueError("id must be > 0, got %d" % d["lora_int_id"])
    if not d.get("lora_path"):
        raise ValueError("lora_path cannot be empty")
    return d
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
known = {"max_model_len": 2048, "num_gpu_blocks": 100, "dp_stats_address": None,
         "block_size": 16, "dtype": "bfloat16", "vllm_version": layout.get("vllm_version"),
         "data_parallel_rank": rank}
# The release's registration: an empty frame, or a map of exactly its keys.
reg = b"" if layout["registration"] is None else msgpack.packb(
    {k: known.get(k) for k in layout["registration"]})
for a in addrs["inputs"]:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, ident)
    heartbeat(s)
    monitors.append(s.get_monitor_socket(zmq.EVENT_DISCONNECTED))
    s.connect(a)
    s.send(reg)
    ins.append(s)
ready = {"status": "READY", "local": False, "headless": True}
for k in layout["ready"]["required"]:
    ready[k] = known.get(k)
hs.send(msgpack.packb(ready))
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
            assert len(body) == len(req_idx), (len(body), len(req_idx))
            sp = body[req_idx["sampling_params"]]
            for k in sp:
                assert k in layout["sampling_params"], "unknown SamplingParams key %r" % k
            if "eos_token_id" in req_idx:
                eos = body[req_idx["eos_token_id"]]
                assert eos is None or isinstance(eos, int), eos
            lr = body[req_idx["lora_request"]]
            base = 1000 if lr is None else 1000 * (1 + lora_request(lr)["lora_int_id"])
            running[body[req_idx["request_id"]]] = [sp.get("max_tokens", 16), 0, body[req_idx["client_index"]], base]
        elif typ == b"\x01":
            for rid in body:
                running.pop(rid, None)
        elif typ == b"\x03":
            client, call_id, method, args = body
            if method not in methods:
                reply = [call_id, "Call to %s method failed: 'EngineCoreProc' object has no attribute '%s'" % (method, method), None]
            elif len(args) > 4:  # vLLM asserts the argument count before calling
                reply = [call_id, "Call to %s method failed: " % method, None]
            elif method == "add_lora":
                try:
                    reply = [call_id, None, [None, lora_request(args[0] if len(args) == 1 else None)]]
                except ValueError as e:
                    reply = [call_id, "Call to add_lora method failed: %s" % e, None]
            else:
                reply = [call_id, None, [None, disconnects] if method == "disconnects" else [None, False]]
            outs[client].send(msgpack.packb([rank, [], None, time.monotonic(), reply]))
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
            tok = st[3] + st[1]
            st[1] += 1
            # routed_experts (pooling_output in releases without it) as a
            # numpy-style ndarray whose data is an aux frame index (frame 0 is the
            # body).
            n = 75 if pos % 2 == 0 else 17920
            aux.append(bytes([(steps + pos) & 0xff]) * (4 * n))
            experts = ["<i4", [n], len(aux)]
            finish = None
            if st[1] >= st[0]:
                finish = 1
                del running[rid]
            out = [0 if f in ("num_cached_tokens", "num_external_computed_tokens", "num_nans_in_logits") else None
                   for f in out_fields]
            out[out_idx["request_id"]], out[out_idx["new_token_ids"]] = rid, [tok]
            out[out_idx["finish_reason"]] = finish
            out[out_idx.get("routed_experts", out_idx["pooling_output"])] = experts
            outputs.append(out)
        stats = {"num_running_reqs": len(running), "num_waiting_reqs": 0, "step_counter": steps,
                 "current_wave": 0, "kv_cache_usage": 0.0, "prefix_cache_stats": None}
        outs[0].send_multipart([msgpack.packb([rank, outputs, stats, time.monotonic()])] + aux, copy=False)
