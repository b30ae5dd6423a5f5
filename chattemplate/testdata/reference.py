#!/usr/bin/env python3
"""Reference renderer for the differential tests.

Reimplements the Jinja environment that transformers builds in
utils/chat_template_utils.py (_compile_jinja_template) and the context that
apply_chat_template passes (messages, tools, documents, add_generation_prompt,
the special tokens, then the chat_template_kwargs), using Debian's
python3-jinja2. The clock behind strftime_now is pinned so outputs are
reproducible.

stdin:  {"cases": [{"template", "messages", "tools", "documents",
          "add_generation_prompt", "special", "kwargs", "now"}]}
stdout: [{"out": str} | {"error": str}] in the same order.
"""
import json
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


def render(case):
    now = datetime.fromtimestamp(case.get("now", 0), tz=timezone.utc).replace(tzinfo=None)
    env = make_env(now)
    tmpl = env.from_string(case["template"])
    ctx = dict(case.get("special") or {})
    ctx.update(case.get("kwargs") or {})
    return tmpl.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=case.get("documents"),
        add_generation_prompt=case.get("add_generation_prompt", False),
        **ctx,
    )


def main():
    req = json.load(sys.stdin)
    out = []
    for case in req["cases"]:
        try:
            out.append({"out": render(case)})
        except Exception as e:  # every failure is compared as "an error"
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
