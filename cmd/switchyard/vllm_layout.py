"""Write a switchyard layout file for the vLLM installed here.

Run it on an engine host, with the Python that runs vLLM:

    switchyard vllm-layout-script | python3 - > vllm-layout.json
    switchyard serve --vllm-layout vllm-layout.json ...

It imports vLLM's own engine-core classes and writes what switchyard needs to talk to
engines of this release: the ordered fields of every positional (msgspec array_like)
struct with their types and encoded defaults, the SamplingParams keys, the finish
reasons, the registration's keys, the EngineCore methods that tell releases apart,
and vllm.__version__. It only reads class definitions: no model, no GPU.
"""
import dataclasses
import json
import sys

import msgspec
import vllm
from vllm.sampling_params import SamplingParams
from vllm.v1 import engine as vengine

FORMAT = 1
# EngineCore methods switchyard's probes ask for (see wire/layout_place.go).
PROBE_METHODS = ["save_tensorized_model", "log_error_detail", "log_iteration_details",
                 "is_scheduler_paused", "get_kv_cache_group_metadata"]


def encoded_default(f):
    """vLLM's default for a msgspec field, as msgpack hex; None when required."""
    if f.required:
        return None
    value = f.default
    if value is msgspec.NODEFAULT:
        value = f.default_factory()
    try:
        return msgspec.msgpack.encode(value).hex()
    except Exception:  # a default msgpack cannot hold: nil is what an absent value is
        return "c0"


def struct_fields(cls):
    out = []
    for f in msgspec.structs.fields(cls):
        field = {"name": f.encode_name, "type": repr(f.type)}
        default = encoded_default(f)
        if default is not None:
            field["default"] = default
        out.append(field)
    return {"fields": out}


def plain_fields(cls):
    """A NamedTuple's or dataclass's field names, in order."""
    if hasattr(cls, "_fields"):
        return {"fields": list(cls._fields)}
    return {"fields": [f.name for f in dataclasses.fields(cls)]}


def optional(module, name):
    try:
        mod = __import__(module, fromlist=[name])
        return getattr(mod, name)
    except Exception:
        return None


def main():
    structs = {}
    for name in ["EngineCoreRequest", "EngineCoreOutput", "EngineCoreOutputs", "UtilityOutput"]:
        structs[name] = struct_fields(getattr(vengine, name))
    lora = optional("vllm.lora.request", "LoRARequest")
    if lora is not None and isinstance(lora, type) and issubclass(lora, msgspec.Struct):
        structs["LoRARequest"] = struct_fields(lora)
    pooling = optional("vllm.pooling_params", "PoolingParams")
    if pooling is not None and isinstance(pooling, type) and issubclass(pooling, msgspec.Struct):
        structs["PoolingParams"] = struct_fields(pooling)
    lists = optional("vllm.v1.outputs", "LogprobsLists")
    if lists is not None:
        structs["LogprobsLists"] = plain_fields(lists)
    prefill = optional("vllm.v1.metrics.stats", "PrefillStats")
    if prefill is not None and dataclasses.is_dataclass(prefill):
        structs["PrefillStats"] = plain_fields(prefill)

    ready = getattr(vengine, "EngineCoreReadyResponse", None)
    registration = None  # releases before it register with an empty frame
    if ready is not None:
        registration = plain_fields(ready)["fields"]

    core = optional("vllm.v1.engine.core", "EngineCore")
    has = [m for m in PROBE_METHODS if core is not None and hasattr(core, m)]
    lacks = [m for m in PROBE_METHODS if m not in has] if core is not None else []

    reasons = sorted(vengine.FinishReason, key=lambda r: r.value)
    layout = {
        "format": FORMAT,
        "name": "vllm-" + vllm.__version__,
        "description": "generated from vLLM %s's own classes" % vllm.__version__,
        "vllm_version": vllm.__version__,
        "registration": registration,
        "ready": {"required": [], "absent": []},
        "probe": {"has": has, "lacks": lacks},
        "finish_reasons": [r.name for r in reasons],
        "sampling_params": [f.encode_name for f in msgspec.structs.fields(SamplingParams)],
        "structs": structs,
    }
    json.dump(layout, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
