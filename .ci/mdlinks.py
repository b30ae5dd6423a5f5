#!/usr/bin/env python3
"""Checks every relative link in the repository's Markdown files: the target file
exists inside the repository and, for a link into a Markdown file with #fragment, the
heading exists (GitHub's slug rules). Links to http(s) are not followed.
Usage: python3 .ci/mdlinks.py [ROOT]; exits 1 naming each broken link."""
import os
import re
import subprocess
import sys


def slug(heading):
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        out, fenced = set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    fenced = not fenced
                m = None if fenced else re.match(r"#+\s+(.*)", line)
                if m:
                    out.add(slug(m.group(1)))
        cache[path] = out
    return cache[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.md"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.split()
    checked, broken = 0, []
    for name in files:
        path = os.path.join(root, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            checked += 1
            file_part, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not (dest == root or dest.startswith(root + os.sep)):
                broken.append(f"{name}: {target} is outside the repository")
            elif not os.path.exists(dest):
                broken.append(f"{name}: {target} does not exist")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                broken.append(f"{name}: {target} has no such heading")
    for b in broken:
        print(b)
    print(f"{checked} relative links in {len(files)} Markdown files, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
