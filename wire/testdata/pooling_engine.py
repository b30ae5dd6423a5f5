#!/usr/bin/env python3
"""The input side of a vLLM engine of one release, for pooling ADDs: binds a libzmq
(pyzmq) PULL, prints its endpoint, then decodes every [type, body] message it gets as
that release's EngineCoreRequest and PoolingParams the way msgspec's typed decode does
(array_like: positional; a shorter array takes the defaults; int is not bool; the task
is the release's PoolingTask Literal; __post_init__'s output_kind FINAL_ONLY). Used by
wire/pooling_peer_test.go.

usage: pooling_engine.py LAYOUT_JSON RELEASE

For each message it prints one JSON line {"id": request_id, "ok": bool, "error": str,
"params": {field: value}}; b"END" ends it. Run with python3-zmq and python3-msgpack.
"""
import json
import sys

import msgpack
import zmq

layout = json.load(open(sys.argv[1]))
release = sys.argv[2]
req_fields = layout["structs"]["EngineCoreRequest"]["fields"]
req_required = layout["structs"]["EngineCoreRequest"].get("required", 9)
pool_fields = [f if isinstance(f, str) else f["name"] for f in layout["structs"]["PoolingParams"]["fields"]]

# PoolingTask per release (vllm/tasks.py).
TASKS = {
    "v0.11": {"encode", "embed", "classify", "score"},
    "v0.12": {"embed", "classify", "score", "token_embed", "token_classify", "plugin"},
    "v0.15": {"embed", "classify", "score", "token_embed", "token_classify", "plugin"},
    "v0.18": {"embed", "classify", "score", "token_embed", "token_classify", "plugin"},
    "v0.21": {"embed", "classify", "token_embed", "token_classify", "plugin", "embed&token_classify"},
    "newest": {"embed", "classify", "token_embed", "token_classify", "plugin", "embed&token_classify"},
}[release]


def opt(check):
    return lambda v: v is None or check(v)


def is_int(v):
    return type(v) is int


def is_bool(v):
    return type(v) is bool


# PoolingParams' annotations (vllm/pooling_params.py), by field name.
TYPES = {
    "truncate_prompt_tokens": opt(lambda v: is_int(v) and v >= -1),
    "dimensions": opt(is_int),
    "normalize": opt(is_bool),
    "softmax": opt(is_bool),
    "activation": opt(is_bool),
    "use_activation": opt(is_bool),
    "step_tag_id": opt(is_int),
    "returned_token_ids": opt(lambda v: isinstance(v, list) and all(is_int(x) for x in v)),
    "task": opt(lambda v: isinstance(v, str) and v in TASKS),
    "requires_token_ids": is_bool,
    "skip_reading_prefix_cache": opt(is_bool),
    "extra_kwargs": opt(lambda v: isinstance(v, dict)),
    "output_kind": lambda v: is_int(v) and v == 2,  # FINAL_ONLY, asserted by __post_init__
    "late_interaction_params": opt(lambda v: isinstance(v, list)),
}


def check_pooling(p):
    if not isinstance(p, list):
        raise ValueError("pooling_params: expected array, got %r" % type(p).__name__)
    out = {}
    for i, v in enumerate(p[: len(pool_fields)]):  # extra trailing elements are ignored
        name = pool_fields[i]
        if not TYPES[name](v):
            raise ValueError("pooling_params.%s: bad value %r - at $[4][%d]" % (name, v, i))
        out[name] = v
    return out


def check(body):
    if not isinstance(body, list) or len(body) < req_required:
        raise ValueError("EngineCoreRequest: expected an array of at least %d" % req_required)
    idx = {n: i for i, n in enumerate(req_fields)}
    if body[idx["sampling_params"]] is not None:
        raise ValueError("sampling_params set on a pooling request")
    params = check_pooling(body[idx["pooling_params"]])
    if "task" not in params or params["task"] is None:
        raise ValueError("task not set (the model runner asserts it)")
    return body[idx["request_id"]], params


ctx = zmq.Context()
pull = ctx.socket(zmq.PULL)
port = pull.bind_to_random_port("tcp://127.0.0.1")
print(json.dumps({"endpoint": "tcp://127.0.0.1:%d" % port}), flush=True)
while True:
    frames = pull.recv_multipart()
    if frames == [b"END"]:
        break
    rid = None
    try:
        if frames[0] != b"\x00":
            raise ValueError("type frame %r is not ADD" % frames[0])
        rid, params = check(msgpack.unpackb(frames[1], raw=False, strict_map_key=False))
        print(json.dumps({"id": rid, "ok": True, "params": params}), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported to the test
        print(json.dumps({"id": rid, "ok": False, "error": str(e)}), flush=True)
