#!/usr/bin/env python3
"""Reads `go test -json` on stdin and prints what a plain `go test` run prints (each
package's ok/FAIL line and the output of failed tests), then every skipped test with
its reason, then one closing line: "tests: N passed, N failed, N skipped".

Why: a plain `go test` run says nothing about skipped tests, and a test whose real
part is missing must not pass unseen."""
import json
import re
import sys

# A test's own log and error lines ("    x_test.go:12: ..."): repeated after a failed
# test's output, because that output can end in pages of server log and CI shows
# only its tail.
OWN_LINE = re.compile(r"^\s+\w+_test\.go:\d+: ")

tests = {}        # (package, test) -> output lines
skipped = []      # (package, test, reason lines)
passed = failed = 0
failed_pkgs = []

for raw in sys.stdin:
    try:
        ev = json.loads(raw)
    except ValueError:
        sys.stdout.write(raw)  # build errors and the like come as plain text
        continue
    pkg, test, action = ev.get("Package", ""), ev.get("Test"), ev.get("Action")
    if action == "build-output":  # a package that does not compile
        sys.stdout.write(ev.get("Output", ""))
        continue
    if test is None:
        # Package-level lines: "ok pkg 1.2s", "FAIL pkg", "--- FAIL" of a build,
        # panics outside a test.
        if action == "output":
            line = ev.get("Output", "")
            if not line.startswith(("=== RUN", "=== PAUSE", "=== CONT", "PASS\n")):
                sys.stdout.write(line)
                sys.stdout.flush()
        elif action == "fail":
            failed_pkgs.append(pkg)
        continue
    key = (pkg, test)
    if action == "output":
        tests.setdefault(key, []).append(ev.get("Output", ""))
    elif action == "pass":
        passed += 1
        tests.pop(key, None)
    elif action == "fail":
        failed += 1
        # Subtests too: go test -json gives a subtest's lines to the subtest only.
        out = tests.pop(key, [])
        sys.stdout.write("".join(l for l in out if not l.startswith(("=== RUN", "=== PAUSE", "=== CONT"))))
        own = [l.rstrip()[:400] for l in out if OWN_LINE.match(l)]
        if own:
            print("--- %s %s: the test's own lines, again:" % (pkg, test))
            print("\n".join(own[-40:]))
        sys.stdout.flush()
    elif action == "skip":
        out = tests.pop(key, [])
        reason = [l.strip() for l in out if l.strip() and not l.startswith(("=== ", "--- SKIP"))]
        skipped.append((pkg, test, reason))

if skipped:
    print("\nskipped tests (%d):" % len(skipped))
    for pkg, test, reason in skipped:
        print("  %s %s: %s" % (pkg, test, " ".join(reason)[:300] or "(no reason given)"))
print("tests: %d passed, %d failed, %d skipped" % (passed, failed, len(skipped)))
sys.exit(1 if failed or failed_pkgs else 0)
