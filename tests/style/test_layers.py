#!/usr/bin/env python3
"""layers.py must fail when the rule is broken, not only pass on a tree that keeps it: on a copy
of resolver/ and include/ it plants an upward include, a circle between two files of one folder,
a private header named without its folder and libuv below serve/, and expects each to be
reported (and the untouched copy to pass).

Usage: test_layers.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(tree):
    p = subprocess.run([sys.executable, os.path.join(HERE, "layers.py"), tree],
                       capture_output=True, text=True)
    return p.returncode, p.stdout


def plant(tree, rel, text, after="#include"):
    """Insert text before the first line starting with `after` in tree/rel."""
    path = os.path.join(tree, rel)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith(after))
    lines.insert(i, text)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv):
    src = argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        os.mkdir(base)
        for d in ("resolver", "include"):
            shutil.copytree(os.path.join(src, d), os.path.join(base, d))
        shutil.copy(os.path.join(src, "CMakeLists.txt"), base)
        rc, out = run(base)
        if rc != 0:
            failures.append("the tree as it is fails:\n" + out)

        cases = [
            ("upward include", "resolver/wire/name.c", '#include "serve/worker.h"',
             "resolver/wire/name.c (wire) includes resolver/serve/worker.h of the higher layer serve"),
            ("public header of a higher layer", "resolver/policy/rpz.c", '#include "moat/log.h"',
             "resolver/policy/rpz.c (policy) includes include/moat/log.h of the higher layer serve"),
            ("libuv below serve", "resolver/policy/forward.c", "#include <uv.h>",
             "resolver/policy/forward.c (policy) includes <uv.h>, reserved to serve and above"),
            ("private header without its folder", "resolver/serve/cache.c", '#include "worker.h"',
             'resolver/serve/cache.c: #include "worker.h": name a private header by its folder'),
        ]
        for name, rel, text, want in cases:
            tree = os.path.join(tmp, name.replace(" ", "_"))
            shutil.copytree(base, tree)
            plant(tree, rel, text)
            rc, out = run(tree)
            if rc == 0 or want not in out:
                failures.append(f"{name}: expected '{want}', got rc {rc}:\n{out}")

        # A circle: cache.c calls into ratelimit.c, which (planted) calls back into cache.c.
        tree = os.path.join(tmp, "circle")
        shutil.copytree(base, tree)
        plant(tree, "resolver/serve/ratelimit.c",
              '#include "moat/cache.h"\nvoid ratelimit_planted(void) { cache_free(NULL); }',
              after="#include <netinet/in.h>")
        plant(tree, "resolver/serve/cache.c",
              '#include "moat/ratelimit.h"\nvoid cache_planted(void) { ratelimit_free(NULL); }',
              after="#include <sodium.h>")
        rc, out = run(tree)
        want = "circle: resolver/serve/cache.c resolver/serve/ratelimit.c"
        if rc == 0 or want not in out:
            failures.append(f"circle: expected '{want}', got rc {rc}:\n{out}")
    for f in failures:
        print(f)
    print(f"test_layers: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
