#!/usr/bin/env python3
"""Cross-check switchyard's wire codecs against an independent msgpack implementation.

Each case below is a message shaped the way msgspec (vLLM's serializer) shapes it:
array_like structs as full-length arrays, SamplingParams as a sparse map of the
non-default fields, raw tensor bytes as ext 3 (or an aux-frame index when they are
256 bytes or larger). Run by wire/roundtrip_test.go:

  roundtrip.py py2go   print every case as JSON lines {"name", "frames"} (hex);
                       Go decodes them and compares with its own typed expectation.
  roundtrip.py go2py   read Go-encoded cases as JSON lines on stdin, decode them
                       here and compare every field with the same case values;
                       exit 1 and name the differences on any mismatch.
"""
import json
import sys

import msgpack

AUX_THRESHOLD = 256  # VLLM_MSGPACK_ZERO_COPY_THRESHOLD


def tensor(dtype, shape, data, aux):
    """[dtype, shape, data] with data inline (ext 3) or as an aux-frame index."""
    if len(data) < AUX_THRESHOLD:
        return [dtype, shape, msgpack.ExtType(3, data)]
    aux.append(data)
    return [dtype, shape, len(aux)]  # frame 0 is the body


def add_full():
    aux = []
    sampling = {
        "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1,
        "temperature": 0.7, "top_p": 0.9, "top_k": 50, "min_p": 0.05, "seed": 42,
        "stop": ["###"], "stop_token_ids": [13], "max_tokens": 100, "min_tokens": 2,
        "logprobs": 3, "prompt_logprobs": 1, "flat_logprobs": True,
        "skip_special_tokens": False, "spaces_between_special_tokens": False,
        "include_stop_str_in_output": True, "output_kind": 1, "stream_interval": 4,
        "skip_clone": True, "_eos_token_id": 2, "_all_stop_token_ids": [2, 13],
        "structured_outputs": {"json": "{}"}, "logit_bias": {5: 1.5, 7: -2.0},
        "allowed_token_ids": [1, 2, 3], "extra_args": {"k": "v"}, "bad_words": ["bad"],
        "_bad_words_token_ids": [[99]], "skip_reading_prefix_cache": True,
        "thinking_token_budget": 64,
        "repetition_detection": {"max_pattern_size": 4, "min_pattern_size": 1, "min_count": 3},
        "routed_experts_prompt_start": 3, "future_knob": 5,
    }
    lora = ["adapter", 7, "/loras/a", "base", {"s3": "x"}, True, False]
    body = [
        "req-full", [1, 2, 300, 70000], [{"modality": "image"}], sampling, None,
        1767225600.25, lora, "salt", 1,
        tensor("float32", [1, 2], bytes(range(8)), aux), [True, False],
        1, 2, -3, {"traceparent": "00-abc"}, True, "ext-1", False,
        {"chat_template_kwargs": {"enable_thinking": False}}, True, "sess-9",
        {"hint": 1},
    ]
    return body, aux


# The newest vLLM frontend writes all 22 EngineCoreRequest fields, kv_hints (None)
# included; so does switchyard's native layout.
def add_pooling():
    aux = []
    body = [
        "req-pool", None, None, None, [None, True], 1.5, None, None, None,
        tensor("bfloat16", [256], bytes(512), aux), None, 0, 0, 0, None, False,
        None, None, None, False, None, None,
    ]
    return body, aux


def add_default():
    sampling = {"stop": [], "stop_token_ids": [], "max_tokens": 8, "_eos_token_id": 0,
                "_all_stop_token_ids": [0], "bad_words": [], "skip_reading_prefix_cache": False}
    body = ["r", [0], None, sampling, None, 0.0, None, None, None, None, None,
            0, 0, 0, None, False, None, None, None, False, None, None]
    return body, []


def output_entry(rid, tokens, **kw):
    e = [rid, tokens] + [None] * 11 + [0] + [None] * 3
    names = ["new_logprobs", "new_prompt_logprobs_tensors", "pooling_output",
             "finish_reason", "stop_reason", "events", "kv_transfer_params",
             "ec_transfer_params", "trace_headers", "prefill_stats", "routed_experts",
             "num_nans_in_logits", "mm_cache_miss_hashes", "new_sampling_mask",
             "spec_decode_metrics"]
    for k, v in kw.items():
        e[2 + names.index(k)] = v
    return e


def outputs_full():
    aux = []
    full = output_entry(
        "a", [5, 6],
        new_logprobs=[tensor("<i8", [1, 40], bytes(320), aux),
                      tensor("<f4", [1, 2], bytes(8), aux),
                      tensor("<i8", [1], bytes(8), aux), [0, 1]],
        new_prompt_logprobs_tensors=[tensor("int64", [1], bytes(8), aux),
                                     tensor("float32", [1], bytes(4), aux),
                                     tensor("int64", [1], bytes(8), aux)],
        pooling_output=tensor("float32", [2], bytes(8), aux),
        finish_reason=0, stop_reason="###",
        events=[{"type": 1, "timestamp": 1.5}, {"type": 2, "timestamp": 2.5}],
        kv_transfer_params={"do_remote_decode": True},
        ec_transfer_params={"e": 1}, trace_headers={"t": "x"},
        prefill_stats={"num_prompt_tokens": 20, "num_computed_tokens": 20,
                       "num_cached_tokens": 16, "num_local_cached_tokens": 16,
                       "num_external_cached_tokens": 0, "num_cache_creation_tokens": 4},
        routed_experts=tensor("<i4", [1], bytes(4), aux), num_nans_in_logits=2,
        mm_cache_miss_hashes=["h1"], new_sampling_mask=["<i4", [5], msgpack.ExtType(3, bytes(20))],
        spec_decode_metrics={"accepted": 3},
    )
    stats = {"num_running_reqs": 3, "num_waiting_reqs": 4, "step_counter": 5,
             "current_wave": 6, "kv_cache_usage": 0.5}
    body = [7, [full, output_entry("b", [], finish_reason=1, stop_reason=13)], stats,
            12345.678, [-1, None, [None, ["RECONFIGURE_FINISHED", 1]]], ["a", "b"], 2, 3]
    return body, aux


def outputs_utility():
    body = [0, [], None, 1.0, [2**64 - 1, "Call to x failed: boom", None], None, None, None]
    return body, []


CASES = {
    "add_full": ("00", add_full),
    "add_pooling": ("00", add_pooling),
    "add_default": ("00", add_default),
    "abort": ("01", lambda: (["a", "b", "c"], [])),
    "utility": ("03", lambda: ([1, 2**64 - 1, "reset_prefix_cache", [False, True]], [])),
    "start_dp_wave": ("02", lambda: ([4, 1], [])),
    "start_dp_wave_all": ("02", lambda: ([4, None], [])),
    "outputs_full": (None, outputs_full),
    "outputs_utility": (None, outputs_utility),
    "hello": (None, lambda: ({"status": "HELLO", "local": True, "headless": False}, [])),
    "ready_all": (None, lambda: ({"status": "READY", "local": False, "headless": True,
                                  "parallel_config_hash": "h", "coord_store_port": 5,
                                  "num_redundant_experts": 0, "num_gpu_blocks": 100,
                                  "dp_stats_address": "tcp://x:1"}, [])),
    "init": (None, lambda: ({"addresses": {"inputs": ["tcp://a:1", "tcp://a:2"], "outputs": ["tcp://a:3", "tcp://a:4"],
                                           "coordinator_input": "tcp://c:1", "coordinator_output": "tcp://c:2",
                                           "frontend_stats_publish_address": "tcp://c:3"},
                             "parallel_config": {"data_parallel_master_ip": "10.0.0.1",
                                                 "data_parallel_master_port": 29500,
                                                 "_data_parallel_master_port_list": [1, 2],
                                                 "data_parallel_size": 2}}, [])),
    "registration": (None, lambda: (registration(), [])),
    "coordinator_publish": (None, lambda: ([[[1, 2, 0.75], [0, 0, 0.0]], 9, False], [])),
    "coordinator_publish_nil": (None, lambda: ([None, 1, True], [])),
    "first_req": (None, lambda: ([b"\x02\x01", 5], [])),
    "first_req_int": (None, lambda: ([258, 5], [])),
}


def registration():
    keys = ["max_model_len", "num_gpu_blocks", "dp_stats_address", "block_size",
            "mamba_block_size", "dtype", "vllm_version", "world_size", "data_parallel_size",
            "kv_cache_size_tokens", "kv_cache_max_concurrency", "tensor_parallel_size",
            "pipeline_parallel_size", "decode_context_parallel_size", "data_parallel_rank",
            "max_num_seqs", "max_num_batched_tokens", "instance_id", "supports_lora",
            "max_loras", "coord_store_port", "coordinator_input_address",
            "coordinator_output_address", "kv_events_config", "weight_transfer_backend",
            "enable_sleep_mode", "supports_draft_weight_updates"]
    d = dict.fromkeys(keys)
    d.update(max_model_len=4096, num_gpu_blocks=100, block_size=16, dtype="bfloat16",
             kv_cache_max_concurrency=12.5, supports_lora=True, max_loras=8,
             kv_events_config={"enable_kv_cache_events": True, "topic": "kv"},
             weight_transfer_backend="nccl", enable_sleep_mode=True,
             supports_draft_weight_updates=False, effective_attention_block_size=32)
    return d


def frames_of(name):
    type_hex, build = CASES[name]
    body, aux = build()
    frames = [msgpack.packb(body, use_bin_type=True)] + list(aux)
    hexes = [f.hex() for f in frames]
    return ([type_hex] if type_hex else []) + hexes


def unpack(b):
    return msgpack.unpackb(b, raw=False, strict_map_key=False)


def diff(path, want, got, out):
    """Collect every differing leaf, so a failure names the field."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got), key=str):
            if k not in got:
                out.append(f"{path}.{k}: missing (want {want[k]!r})")
            elif k not in want:
                out.append(f"{path}.{k}: unexpected {got[k]!r}")
            else:
                diff(f"{path}.{k}", want[k], got[k], out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append(f"{path}: length {len(got)}, want {len(want)}")
        for i, (w, g) in enumerate(zip(want, got)):
            diff(f"{path}[{i}]", w, g, out)
    elif type(want) is not type(got) or want != got:
        out.append(f"{path}: got {got!r}, want {want!r}")


def go2py():
    failures = []
    seen = set()
    for line in sys.stdin:
        msg = json.loads(line)
        name = msg["name"]
        seen.add(name)
        frames = [bytes.fromhex(h) for h in msg["frames"]]
        type_hex, build = CASES[name]
        want_body, want_aux = build()
        if type_hex:
            if frames[0].hex() != type_hex:
                failures.append(f"{name}: type frame {frames[0].hex()}, want {type_hex}")
            frames = frames[1:]
        out = []
        diff(name, want_body, unpack(frames[0]), out)
        if [bytes(a) for a in want_aux] != frames[1:]:
            out.append(f"{name}: aux frames differ ({len(frames) - 1} vs {len(want_aux)})")
        failures += out
    missing = set(CASES) - seen
    if missing:
        failures.append(f"cases not sent by Go: {sorted(missing)}")
    for f in failures:
        print(f)
    print(f"go2py: {len(seen)} cases, {len(failures)} differences")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["py2go"]:
        for name in CASES:
            print(json.dumps({"name": name, "frames": frames_of(name)}))
        return 0
    if sys.argv[1:] == ["go2py"]:
        return go2py()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
