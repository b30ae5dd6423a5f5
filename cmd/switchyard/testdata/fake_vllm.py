"""Writes a stand-in for the vLLM and msgspec packages that vllm_layout.py imports,
built from one release's golden fixture (its real struct fields, in order) and
switchyard's layout of that release (required counts, registration keys, methods).
Neither vLLM nor msgspec can be installed on a test machine; the stand-ins expose
only what the script reads: msgspec.structs.fields, msgspec.msgpack.encode,
msgspec.NODEFAULT, msgspec.Struct, and vLLM's classes.

usage: fake_vllm.py FIXTURE_JSON LAYOUT_JSON OUT_DIR VERSION
"""
import json
import os
import sys

fixture, layout_path, out, version = sys.argv[1:5]
fx = json.load(open(fixture))
lay = json.load(open(layout_path))
names = fx["layout"]


def write(path, text):
    path = os.path.join(out, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


write("msgspec/__init__.py", '''
import msgpack as _msgpack


class _NoDefault:
    pass


NODEFAULT = _NoDefault()


class Struct:
    _names = []
    _required = 0


class _FieldInfo:
    def __init__(self, name, required):
        self.name = self.encode_name = name
        self.type = object
        self.required = required
        self.default = NODEFAULT if required else None
        self.default_factory = None


class structs:
    @staticmethod
    def fields(cls):
        return tuple(_FieldInfo(n, i < cls._required) for i, n in enumerate(cls._names))


class msgpack:
    @staticmethod
    def encode(v):
        return _msgpack.packb(v)
''')


def struct(name, fields, required=0):
    return "class %s(msgspec.Struct):\n    _names = %r\n    _required = %d\n\n\n" % (name, fields, required)


write("vllm/__init__.py", "__version__ = %r\n" % version)
write("vllm/sampling_params.py", "import msgspec\n\n\n" + struct("SamplingParams", names["SamplingParams"]))
write("vllm/v1/__init__.py", "")
reqd = lay["structs"]["EngineCoreRequest"]["required"]
engine = "import dataclasses\nimport enum\n\nimport msgspec\n\n\n"
engine += struct("EngineCoreRequest", names["EngineCoreRequest"], reqd)
engine += struct("EngineCoreOutput", names["EngineCoreOutput"], 2)
engine += struct("EngineCoreOutputs", names["EngineCoreOutputs"], 0)
engine += struct("UtilityOutput", names["UtilityOutput"], 1)
engine += "class FinishReason(enum.IntEnum):\n" + "".join(
    "    %s = %d\n" % (r, i) for i, r in enumerate(lay["finish_reasons"])) + "\n\n"
if lay["registration"] is not None:
    engine += "@dataclasses.dataclass\nclass EngineCoreReadyResponse:\n" + "".join(
        "    %s: object = None\n" % k for k in lay["registration"]) + "\n\n"
write("vllm/v1/engine/__init__.py", engine)
write("vllm/v1/engine/core.py", "class EngineCore:\n" + "".join(
    "    def %s(self):\n        pass\n\n" % m for m in lay["probe"]["has"]) + "    pass\n")
lists = lay["structs"].get("LogprobsLists", {"fields": ["logprob_token_ids", "logprobs", "sampled_token_ranks", "cu_num_generated_tokens"]})["fields"]
write("vllm/v1/outputs.py", "import typing\n\n\nclass LogprobsLists(typing.NamedTuple):\n" + "".join(
    "    %s: object\n" % f for f in lists))
if "PrefillStats" in lay["structs"]:
    write("vllm/v1/metrics/__init__.py", "")
    write("vllm/v1/metrics/stats.py", "import dataclasses\n\n\n@dataclasses.dataclass\nclass PrefillStats:\n" + "".join(
        "    %s: int = 0\n" % f for f in lay["structs"]["PrefillStats"]["fields"]))
if "LoRARequest" in lay["structs"]:
    write("vllm/lora/__init__.py", "")
    write("vllm/lora/request.py", "import msgspec\n\n\n" + struct("LoRARequest", lay["structs"]["LoRARequest"]["fields"], 2))
