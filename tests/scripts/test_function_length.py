#!/usr/bin/env python3
"""No product function over ~80 lines (issue 25): a brace-matching scan of the
.cc and .h files of core/, shim/ and rcache/. A function is a top-level brace block
(namespace blocks are entered, class/struct/enum/union bodies and initializer
lists are skipped into) whose opening line looks like a definition. Counted
from its first line (the signature) to its closing brace.
Usage: test_function_length.py SOURCE_ROOT [--list]. Prints one line per
function over the limit that is not allowed below, and "N passed, M failed";
--list prints every function over the limit, allowed or not. Exit 1 on any."""
import pathlib
import re
import sys

LIMIT = 80
FOLDERS = ("core", "shim", "rcache")
# Headers too: an inline body (or a class's member defined in its body) is a
# function like any other.
SUFFIXES = (".cc", ".h")

# Functions over the limit left alone on purpose: path -> {name: reason},
# e.g. {"core/x.cc": {"X::run": "owned by a concurrent change"}}. None now.
ALLOWED = {}

# One pass, so that a quote inside a comment or a comment marker inside a
# string is not taken for what it is not.
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/|(?m:^\s*#[^\n]*)',
                   re.S)
NAME = re.compile(r"([A-Za-z_~][\w:~]*(?:operator\s*\S+)?)\s*\(")
NOT_FUNCTION = re.compile(r"^\s*(?:(?:template\s*<.*>\s*)?(?:class|struct|union|enum)\b|"
                          r"namespace\b|extern\s+\"C\")")
CLASS = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:class|struct|union)\b")


def strip(text):
    """Comments, literals and preprocessor lines blanked, newlines kept."""
    return TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(text):
    """(name, first line, last line) of every function body in text."""
    text = strip(text)
    out = []
    stmt_start = 0  # where the text before the current brace began
    depth_kinds = []  # per open brace: "scope" (namespace/extern) or "skip"
    i = 0
    while i < len(text):
        c = text[i]
        if c in ";}":
            if c == "}" and depth_kinds:
                depth_kinds.pop()
            stmt_start = i + 1
        elif c == "{":
            head = text[stmt_start:i]
            if re.search(r"\bnamespace\b[^(){};]*$", head) or re.search(r'extern\s*$', head):
                depth_kinds.append("scope")
                stmt_start = i + 1
            elif not NOT_FUNCTION.match(head) and ")" in head and "=" not in head.split("(")[0]:
                end = match_brace(text, i)
                name_m = NAME.findall(head.split("(")[0] + "(")
                name = name_m[-1] if name_m else "?"
                first = text.count("\n", 0, stmt_start + len(head) - len(head.lstrip())) + 1
                last = text.count("\n", 0, end) + 1
                out.append((name, first, last))
                i = end
                stmt_start = end + 1
            else:
                end = match_brace(text, i)  # class body, initializer: look inside classes
                if CLASS.match(head):
                    for name, f, l in functions_in(text, i + 1, end):
                        out.append((name, f, l))
                i = end
                stmt_start = end + 1
        i += 1
    return out


def functions_in(text, start, end):
    inner = " " * start + text[start:end]
    return functions(inner)


def match_brace(text, i):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def main():
    root = pathlib.Path(sys.argv[1])
    listing = "--list" in sys.argv[2:]
    passed = failed = 0
    for folder in FOLDERS:
        for path in sorted(p for p in (root / folder).rglob("*") if p.suffix in SUFFIXES):
            rel = path.relative_to(root).as_posix()
            allowed = ALLOWED.get(rel, {})
            for name, first, last in functions(path.read_text(errors="replace")):
                lines = last - first + 1
                if lines <= LIMIT:
                    passed += 1
                    continue
                if listing:
                    print(f"{rel}:{first} {name} {lines} lines"
                          f"{' (allowed: ' + allowed[name] + ')' if name in allowed else ''}")
                if name in allowed:
                    passed += 1
                    continue
                failed += 1
                if not listing:
                    print(f"FAIL {rel}:{first} {name} is {lines} lines (limit {LIMIT})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
