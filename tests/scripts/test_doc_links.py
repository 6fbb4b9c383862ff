#!/usr/bin/env python3
"""README.md, docs/*.md and bench/RESULTS.md work in a clone: every Markdown
link to a file resolves inside the repository, no path points outside it
(../ above the top), and every docs/ or bench/ .md file they name exists.
Usage: test_doc_links.py REPO_TOP [FILE...]   (default: those documents)"""
import os
import re
import sys

top = os.path.realpath(sys.argv[1])
files = sys.argv[2:] or (["README.md", "bench/RESULTS.md"] +
                         sorted("docs/" + f for f in os.listdir(os.path.join(top, "docs"))
                                if f.endswith(".md")))
problems = []
for rel in files:
    path = os.path.join(top, rel)
    base = os.path.dirname(path)
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue  # an anchor in the page, or a URL
        full = os.path.realpath(os.path.join(base, target))
        if not full.startswith(top + os.sep) or not os.path.exists(full):
            problems.append(f"{rel}: link ({m.group(1)}) does not resolve inside the repository")
    for m in re.finditer(r"(?<![\w/.])((?:\.\./)+[\w./-]+)", text):
        full = os.path.realpath(os.path.join(base, m.group(1)))
        if not full.startswith(top + os.sep):
            problems.append(f"{rel}: '{m.group(1)}' points outside the repository")
    for m in re.finditer(r"(?<![\w/.])((?:docs|bench)/[\w./-]+\.md)\b", text):
        if not os.path.exists(os.path.join(top, m.group(1))):
            problems.append(f"{rel}: names {m.group(1)}, which does not exist")
for p in problems:
    print("FAIL", p)
print(f"{len(files)} documents checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
