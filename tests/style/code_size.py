#!/usr/bin/env python3
"""code_size.py: the size limits of issue 13, checked on every test run: no C function in the
programs' sources (resolver/, tools/fw/, tools/escape/, tools/ctl/) longer than MAX_FUNC lines and
no source file longer than MAX_FILE lines. A function is counted from the first line of its
signature to its closing brace; the tree's clang-format style (Linux braces) puts a function's
opening and closing braces alone in column 0, which is what this looks for.
Usage: tests/style/code_size.py SRC_DIR   (exit 1 and one line per excess when a limit is passed)"""
import glob
import os
import re
import sys

MAX_FUNC = 100
MAX_FILE = 900
DIRS = ("resolver", "tools/fw", "tools/escape", "tools/ctl")


def functions(lines):
    """(name, first line, length) of each top-level function body."""
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(("}", "#")) \
                    and not lines[j - 1].rstrip().endswith((";", "*/")):
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"(\w+)\s*\(", " ".join(lines[j:i]))
            yield (m.group(1) if m else "?"), j + 1, k - j + 1
            i = k
        i += 1


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = []
    for d in DIRS:
        for path in sorted(glob.glob(os.path.join(src, d, "**", "*.[ch]"), recursive=True)):
            rel = os.path.relpath(path, src)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            if len(lines) - 1 > MAX_FILE:
                bad.append(f"{rel}: {len(lines) - 1} lines (limit {MAX_FILE})")
            for name, first, n in functions(lines):
                if n > MAX_FUNC:
                    bad.append(f"{rel}:{first}: {name}() is {n} lines (limit {MAX_FUNC})")
    for b in bad:
        print(b)
    print(f"code_size: {len(bad)} over the limits" if bad else "code_size: all within the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
