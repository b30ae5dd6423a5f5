#!/usr/bin/env python3
"""Reference renderer for the differential tests.

Reimplements the Jinja environment that transformers builds in
utils/chat_template_utils.py (_compile_jinja_template) and the context that
apply_chat_template passes (messages, tools, documents, add_generation_prompt,
the special tokens, then the chat_template_kwargs), using Debian's
python3-jinja2. The clock behind strftime_now is pinned so outputs are
reproducible.

stdin:  {"cases": [{"template", "messages", "tools", "documents",
          "add_generation_prompt", "special", "kwargs", "now", "vllm"}]}
stdout: [{"out": str, "format": str} | {"error": str}] in the same order.

With "vllm": true the messages and tools first go through what vLLM's
OpenAI server does before apply_chat_template (content format detection,
parse_chat_messages, _postprocess_messages, tool.model_dump()), written
from reading vllm/entrypoints/chat_utils.py.
"""
import json
import resource
import signal
import sys
from datetime import datetime, timezone

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' extension: {% generation %}...{% endgeneration %} renders
    # its body (index tracking is not needed for rendering).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _is_var_access(node, varname):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == varname


def _is_attr_access(node, varname, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return _is_var_access(node.node, varname) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var_access(node.node, varname) and node.attr == key
    return False


def _is_var_or_elems_access(node, varname, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Test):
        return _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _is_var_or_elems_access(node.node, varname, key)
    return _is_attr_access(node, varname, key) if key else _is_var_access(node, varname)


def detect_content_format(env, src):
    root = env.parse(src)
    names = ["messages"]
    queue = list(names)
    while queue:
        cur = queue.pop(0)
        for a in root.find_all(jinja2.nodes.Assign):
            if _is_var_or_elems_access(a.node, cur) and isinstance(a.target, jinja2.nodes.Name):
                names.append(a.target.name)
                if a.target.name != cur:
                    queue.append(a.target.name)
    items = []
    for loop in root.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, n) for n in names) and isinstance(loop.target, jinja2.nodes.Name):
            items.append(loop.target.name)
    for loop in root.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, n, "content") for n in items):
            return "openai"
    return "string"


def vllm_prepare(messages, fmt):
    conv = []
    for m in messages:
        role = m["role"]
        content = m.get("content")
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [{"type": "text", "text": content}]
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
                continue
            t = part.get("type")
            key = t if t in ("refusal", "thinking") else "text"
            if part.get(key) is None:
                continue
            texts.append(part[key])
        if fmt == "openai":
            out = {"role": role, "content": [{"type": "text", "text": t} for t in texts]}
        else:
            out = {"role": role, "content": "\n".join(texts)}
        if role == "assistant":
            if m.get("tool_calls") is not None:
                out["tool_calls"] = list(m["tool_calls"])
            r = m.get("reasoning")
            if r is None:
                r = m.get("reasoning_content")
            if r is not None:
                out["reasoning"] = r
                out["reasoning_content"] = r
        elif role == "tool":
            if "tool_call_id" in m:
                out["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            out["name"] = m["name"]
        if role == "developer":
            out["tools"] = m.get("tools")
        conv.append(out)
    for m in conv:
        if m["role"] == "assistant" and "tool_calls" in m:
            if len(m["tool_calls"]) == 0:
                m.pop("tool_calls")
                continue
            for item in m["tool_calls"]:
                args = item["function"].get("arguments")
                if args:
                    if not isinstance(args, (dict, list)):
                        item["function"]["arguments"] = json.loads(args)
                else:
                    item["function"]["arguments"] = {}
    return conv


def vllm_tools(tools):
    if tools is None:
        return None
    out = []
    for t in tools:
        f = t["function"]
        nf = {"name": f["name"], "description": f.get("description"), "parameters": f.get("parameters")}
        for k, v in f.items():
            nf.setdefault(k, v)
        nt = {"type": t.get("type", "function"), "function": nf}
        for k, v in t.items():
            nt.setdefault(k, v)
        out.append(nt)
    return out


def render(case):
    now = datetime.fromtimestamp(case.get("now", 0), tz=timezone.utc).replace(tzinfo=None)
    env = make_env(now)
    tmpl = env.from_string(case["template"])
    ctx = dict(case.get("special") or {})
    ctx.update(case.get("kwargs") or {})
    messages, tools, fmt = case["messages"], case.get("tools"), ""
    if case.get("vllm"):
        fmt = detect_content_format(env, case["template"])
        messages, tools = vllm_prepare(messages, fmt), vllm_tools(tools)
    return fmt, tmpl.render(
        messages=messages,
        tools=tools,
        documents=case.get("documents"),
        add_generation_prompt=case.get("add_generation_prompt", False),
        **ctx,
    )


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("case took over 5 s")


def main():
    # A random expression can ask Python for a huge int or string; cap the
    # time and memory one case may take.
    signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    req = json.load(sys.stdin)
    out = []
    for case in req["cases"]:
        signal.alarm(5)
        try:
            fmt, text = render(case)
            out.append({"out": text, "format": fmt})
        except Exception as e:  # every failure is compared as "an error"
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
        finally:
            signal.alarm(0)
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
