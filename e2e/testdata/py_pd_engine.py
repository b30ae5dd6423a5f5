"""A vLLM-shaped engine core with a P/D role, written against libzmq (pyzmq) and
python3-msgpack: the peer of e2e/pd_test.go's TestPDPythonEngines.

usage: py_pd_engine.py HANDSHAKE_ADDRESS ROLE STATS_FILE

ROLE prefill: an ADD must carry sampling_params.extra_args.kv_transfer_params with
do_remote_decode true (and max_tokens 1), as vLLM's connectors read it; the final
output (finish_reason LENGTH) carries kv_transfer_params as vLLM's NIXL and
Mooncake connectors return them, plus "handle", a hash of the prompt and the
transfer_id. ROLE decode: an ADD whose kv_transfer_params say do_remote_prefill
must carry the handle of its own prompt, else it finishes with finish_reason ERROR
and no token; a plain ADD is a local prefill. Tokens of request r are 1000, 1001, ...
STATS_FILE is rewritten (JSON) after every request: counts and the ids seen.
"""
import hashlib
import json
import os
import sys
import time

import msgpack
import zmq

hs_addr, role, stats_file = sys.argv[1], sys.argv[2], sys.argv[3]
layout = json.load(open("../wire/layouts/newest.json"))
req_idx = {n: i for i, n in enumerate(layout["structs"]["EngineCoreRequest"]["fields"])}
out_fields = layout["structs"]["EngineCoreOutput"]["fields"]
out_idx = {n: i for i, n in enumerate(out_fields)}
ident = (0).to_bytes(2, "little")
ctx = zmq.Context()
stats = {"prefills": 0, "remote": 0, "local": 0, "refused": 0, "bad_legs": 0, "ids": [], "transfer_ids": []}


def handle(prompt, tid):
    return hashlib.sha256((",".join(map(str, prompt)) + "|" + str(tid)).encode()).hexdigest()[:16]


def save():
    tmp = stats_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, stats_file)


hs = ctx.socket(zmq.DEALER)
hs.setsockopt(zmq.IDENTITY, ident)
hs.connect(hs_addr)
hs.send(msgpack.packb({"status": "HELLO", "local": False, "headless": True}))
if not hs.poll(20000):
    sys.exit("no INIT within 20 s")
addrs = msgpack.unpackb(hs.recv(), raw=False)["addresses"]
outs = []
for a in addrs["outputs"]:
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.LINGER, 2000)
    s.connect(a)
    outs.append(s)
known = {"max_model_len": 2048, "num_gpu_blocks": 100, "dp_stats_address": None, "block_size": 16,
         "dtype": "bfloat16", "vllm_version": layout.get("vllm_version"), "data_parallel_rank": 0}
reg = b"" if layout["registration"] is None else msgpack.packb({k: known.get(k) for k in layout["registration"]})
ins = []
for a in addrs["inputs"]:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, ident)
    s.connect(a)
    s.send(reg)
    ins.append(s)
ready = {"status": "READY", "local": False, "headless": True}
for k in layout["ready"]["required"]:
    ready[k] = known.get(k)
hs.send(msgpack.packb(ready))
hs.close(linger=2000)
save()

poller = zmq.Poller()
for s in ins:
    poller.register(s, zmq.POLLIN)
running = {}  # id -> [max_tokens, generated, client, kv_transfer_params out | None, refuse]
last_step = time.monotonic()
while True:
    events = dict(poller.poll(5 if running else 200))
    for s in ins:
        if s not in events:
            continue
        frames = s.recv_multipart()
        typ, body = frames[0], msgpack.unpackb(frames[1], raw=False)
        if typ == b"\x00":
            rid = body[req_idx["request_id"]]
            prompt = body[req_idx["prompt_token_ids"]]
            sp = body[req_idx["sampling_params"]]
            kv = (sp.get("extra_args") or {}).get("kv_transfer_params")
            st = [sp.get("max_tokens", 16), 0, body[req_idx["client_index"]], None, False]
            stats["ids"].append(rid)
            if role == "prefill":
                if not kv or kv.get("do_remote_decode") is not True or kv.get("do_remote_prefill") is not False or st[0] != 1:
                    stats["bad_legs"] += 1
                tid = (kv or {}).get("transfer_id") or rid
                stats["transfer_ids"].append(tid)
                st[3] = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": "py-prefill-0",
                         "remote_block_ids": list(range(len(prompt) // 16 + 1)), "remote_host": "127.0.0.1",
                         "remote_port": 5600, "tp_size": 1, "transfer_id": tid, "handle": handle(prompt, tid)}
            elif kv and kv.get("do_remote_prefill"):
                if kv.get("handle") != handle(prompt, kv.get("transfer_id")):
                    stats["refused"] += 1
                    st[4] = True
                else:
                    stats["remote"] += 1
                    stats["transfer_ids"].append(kv.get("transfer_id"))
            else:
                stats["local"] += 1
            running[rid] = st
            save()
        elif typ == b"\x01":
            for rid in body:
                running.pop(rid, None)
        elif typ == b"\x03":
            client, call_id, method, args = body
            outs[client].send(msgpack.packb([0, [], None, time.monotonic(), [call_id, None, [None, False]]]))
    if running and time.monotonic() - last_step >= 0.002:
        last_step = time.monotonic()
        outputs = []
        for rid, st in list(running.items()):
            out = [0 if f in ("num_cached_tokens", "num_external_computed_tokens", "num_nans_in_logits") else None
                   for f in out_fields]
            out[out_idx["request_id"]] = rid
            if st[4]:
                out[out_idx["new_token_ids"]], out[out_idx["finish_reason"]] = [], 3  # ERROR
                del running[rid]
            else:
                out[out_idx["new_token_ids"]] = [1000 + st[1]]
                st[1] += 1
                if st[1] >= st[0]:
                    out[out_idx["finish_reason"]] = 1  # LENGTH
                    if st[3] is not None:
                        out[out_idx["kv_transfer_params"]] = st[3]
                        stats["prefills"] += 1
                        save()
                    del running[rid]
            outputs.append(out)
        stats_map = {"num_running_reqs": len(running), "num_waiting_reqs": 0, "step_counter": 0,
                     "current_wave": 0, "kv_cache_usage": 0.0, "prefix_cache_stats": None}
        outs[0].send(msgpack.packb([0, outputs, stats_map, time.monotonic()]))
