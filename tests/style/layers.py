#!/usr/bin/env python3
"""The layer rule of resolver/ (issue 21): every file may include headers of its own layer or of
the layers below it, never above, and no files form a circle through their headers.

Layers, lowest first, are the folders of resolver/ (LAYERS below); resolver/main.c is above them
all. A header of include/moat/ belongs to the layer whose .c files implement it (define a function
or variable it declares); a header nobody implements (macros, inline functions, types) is listed
in HEADER_ONLY with its layer. A private header (resolver/LAYER/x.h) belongs to its folder.

Circles are found on the graph of use: a .c file points at every other .c file that defines a
function or variable it names, and at each header it includes; a header points at the .c files
its inline functions and macros call (not at those of the functions it merely declares). Any
strongly connected part of that graph of two or more files is a circle: code that needs the
other side to be there, both ways, so neither can be read, tested or moved alone.

It also checks which layers may include the libraries the issue reserves (libuv from serve/ up,
libfyaml only in config/, libmicrohttpd and libfstrm only in serve/ and ops/) and that each
folder's CMakeLists.txt links only the library of the layer below it.

Usage: layers.py SOURCE_DIR [--graph]   (--graph prints every module edge between files)
Exit status 0 when the tree keeps the rule, 1 with one line per finding otherwise.
"""
import os
import re
import sys

LAYERS = ["sys", "wire", "config", "policy", "serve", "ops"]
TOP = "main"  # resolver/main.c
# include/moat headers that no .c file implements, by layer.
HEADER_ONLY = {
    "bytes.h": "sys",  # byte order loads and stores
    "dlist.h": "sys",  # intrusive list
    "spare.h": "sys",  # freed blocks kept for reuse
    "refcount.h": "sys",  # atomic reference counts
    "enumtext.h": "sys",  # enum-to-text tables
    "version.h": "sys",  # generated from version.h.in
    "policy_file_kind.h": "policy",  # which paths and first bytes are a compiled policy
}
# System headers a layer must be at least this high to include.
RESERVED = {
    "uv.h": ("serve", None),  # the event loop: serve/ and above
    "libfyaml.h": ("config", "config"),  # the YAML reader only
    "microhttpd.h": ("serve", "ops"),
    "fstrm.h": ("serve", "ops"),
}
# CMake packages only these folders may name.
RESERVED_LINKS = {
    "FYAML": {"config"},
    "MHD": {"serve", "ops"},
    "FSTRM": {"serve", "ops"},
    "UV": {"serve", "ops"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
# A declaration or definition of a function at the start of a line (clang-format style):
# "type name(" with no leading blank, not static, not a typedef or a macro.
FUNC = re.compile(r"^(?!static\b|typedef\b|#|\s|/\*|\*|\}|extern\b)[A-Za-z_][^;{}()=]*?\b([a-z_][a-z0-9_]*)\s*\(", re.M)
DEFVAR = re.compile(r"^(?!static\b|extern\b|typedef\b|#|\s)[A-Za-z_][^;()=]*?\b([a-z_][a-z0-9_]*)\s*(?:\[[^\]]*\])?\s*(?:=|;)", re.M)
IDENT = re.compile(r"\b[a-z_][a-z0-9_]*\b")
TAG = re.compile(r"\b(?:struct|enum|union)\s+[A-Za-z_]\w*")  # a tag is no use of a like-named function
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
EXTERN = re.compile(r"^extern\s+[^;()]*?\b([a-z_][a-z0-9_]*)\s*(?:\[[^\]]*\])?\s*;", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def layer_rank(layer):
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)


class Tree:
    def __init__(self, src):
        self.src = src
        self.files = {}  # path relative to src -> text without comments
        self.layer = {}  # path -> layer
        self.findings = []
        res = os.path.join(src, "resolver")
        for layer in LAYERS:
            d = os.path.join(res, layer)
            if not os.path.isdir(d):
                self.findings.append(f"resolver/{layer}/: missing layer folder")
                continue
            for name in sorted(os.listdir(d)):
                if name.endswith((".c", ".h")):
                    self.add(f"resolver/{layer}/{name}", layer)
        for name in sorted(os.listdir(res)):
            p = os.path.join(res, name)
            if os.path.isfile(p) and name.endswith((".c", ".h")):
                if name != "main.c":
                    self.findings.append(f"resolver/{name}: every file but main.c lives in a layer folder")
                self.add(f"resolver/{name}", TOP)
            elif os.path.isdir(p) and name not in LAYERS:
                self.findings.append(f"resolver/{name}/: not a layer (LAYERS in tests/style/layers.py)")
        inc = os.path.join(src, "include", "moat")
        for name in sorted(os.listdir(inc)):
            if name.endswith(".h"):
                self.add(f"include/moat/{name}", None)
            elif name == "version.h.in":
                self.files["include/moat/version.h"] = ""
                self.layer["include/moat/version.h"] = None

    def add(self, rel, layer):
        with open(os.path.join(self.src, rel), encoding="utf-8") as f:
            self.files[rel] = strip_comments(f.read())
        self.layer[rel] = layer

    def resolve(self, frm, name):
        """The tree file an #include "name" in frm means, or None (a system header)."""
        if name.startswith("moat/"):
            rel = "include/" + name
        elif "/" in name:
            rel = "resolver/" + name
        else:
            rel = os.path.join(os.path.dirname(frm), name)
        if "/" not in name and frm.startswith("resolver/"):
            self.findings.append(f'{frm}: #include "{name}": name a private header by its folder ("serve/x.h")')
        return rel if rel in self.files else None

    def build(self):
        self.includes = {f: [] for f in self.files}
        self.system = {f: [] for f in self.files}
        for f, text in self.files.items():
            for kind, name in INCLUDE.findall(text):
                if kind == "<":
                    self.system[f].append(name)
                    continue
                r = self.resolve(f, name)
                if r:
                    self.includes[f].append(r)
        self.declares = {}
        declared = {}
        for h, text in self.files.items():
            if h.endswith(".h"):
                self.declares[h] = set(FUNC.findall(text) + EXTERN.findall(text))
                for n in self.declares[h]:
                    declared.setdefault(n, set()).add(h)
        self.defined_in = {}
        self.impl = {h: set() for h in self.files if h.endswith(".h")}
        for c, text in self.files.items():
            if not c.endswith(".c"):
                continue
            names = set(FUNC.findall(text))
            names |= set(DEFVAR.findall(text))
            for n in names & declared.keys():
                self.defined_in[n] = c
                for h in declared[n]:
                    self.impl[h].add(c)
        self.uses = {}
        for f, text in self.files.items():
            words = IDENT.findall(TAG.sub(" ", STRING.sub('""', text)))
            idents = set(words)
            if f.endswith(".h"):
                # a name the header only declares is not a use; one its inline code calls is
                idents = {n for n in idents if n not in self.declares[f] or words.count(n) > 1}
            self.uses[f] = {self.defined_in[n] for n in idents if n in self.defined_in} - {f}
        for h in self.impl:
            if self.layer[h] is not None:
                continue
            base = os.path.basename(h)
            layers = {self.layer[c] for c in self.impl[h]}
            if base in HEADER_ONLY:
                if self.impl[h]:
                    self.findings.append(f"{h}: listed as header-only but implemented by {', '.join(sorted(self.impl[h]))}")
                self.layer[h] = HEADER_ONLY[base]
            elif len(layers) == 1:
                self.layer[h] = layers.pop()
            elif not layers:
                self.findings.append(f"{h}: implemented by no file: list it in HEADER_ONLY with its layer")
                self.layer[h] = LAYERS[0]
            else:
                where = ", ".join(sorted(self.impl[h]))
                self.findings.append(f"{h}: implemented in several layers ({where}): split it")
                self.layer[h] = max(layers, key=layer_rank)

    def check_direction(self):
        for f, incs in self.includes.items():
            for h in incs:
                if layer_rank(self.layer[h]) > layer_rank(self.layer[f]):
                    self.findings.append(
                        f"{f} ({self.layer[f]}) includes {h} of the higher layer {self.layer[h]}")
            for name in self.system[f]:
                if name in RESERVED:
                    low, only = RESERVED[name]
                    lay = self.layer[f]
                    if layer_rank(lay) < layer_rank(low) or (only and lay not in (only, low) and lay != TOP):
                        self.findings.append(f"{f} ({lay}) includes <{name}>, reserved to {low}" +
                                             (f" and {only}" if only and only != low else "") +
                                             ("" if only else " and above"))

    def edges(self):
        g = {f: set(self.uses[f]) for f in self.files}
        for f, incs in self.includes.items():
            g[f] |= set(incs)
        return g

    def check_circles(self):
        g = self.edges()
        index, low, stack, on, sccs = {}, {}, [], set(), []
        counter = [0]

        def visit(v):
            # iterative Tarjan: the graph is small but recursion limits are not worth a risk
            work = [(v, iter(sorted(g[v])))]
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            while work:
                node, it = work[-1]
                nxt = next(it, None)
                if nxt is None:
                    work.pop()
                    if work:
                        low[work[-1][0]] = min(low[work[-1][0]], low[node])
                    if low[node] == index[node]:
                        comp = []
                        while True:
                            w = stack.pop()
                            on.discard(w)
                            comp.append(w)
                            if w == node:
                                break
                        sccs.append(comp)
                elif nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(g[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])

        for v in sorted(g):
            if v not in index:
                visit(v)
        for comp in sccs:
            if len(comp) >= 2:
                self.findings.append("circle: " + " ".join(sorted(comp)))

    def check_cmake(self):
        libs = {layer: f"moat_{layer}" for layer in LAYERS}
        for i, layer in enumerate(LAYERS):
            path = os.path.join(self.src, "resolver", layer, "CMakeLists.txt")
            if not os.path.isfile(path):
                self.findings.append(f"resolver/{layer}/CMakeLists.txt: missing")
                continue
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"#[^\n]*", "", f.read())
            if not re.search(rf"add_library\(\s*{libs[layer]}\b", text):
                self.findings.append(f"resolver/{layer}/CMakeLists.txt: defines no library {libs[layer]}")
            linked = set(re.findall(r"\bmoat_([a-z]+)\b", " ".join(re.findall(r"target_link_libraries\(([^)]*)\)", text))))
            linked.discard(layer)
            want = {LAYERS[i - 1]} if i else set()
            if linked != want:
                self.findings.append(f"resolver/{layer}/CMakeLists.txt links {sorted('moat_' + l for l in linked)}, "
                                     f"should link {sorted('moat_' + l for l in want)} only")
            for pkg, allowed in RESERVED_LINKS.items():
                if re.search(rf"PkgConfig::{pkg}\b", text) and layer not in allowed:
                    self.findings.append(f"resolver/{layer}/CMakeLists.txt links {pkg}, reserved to {sorted(allowed)}")
        top = os.path.join(self.src, "CMakeLists.txt")
        with open(top, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        for pkg in ("FYAML",):
            if re.search(rf"target_link_libraries\([^)]*PkgConfig::{pkg}\b", text):
                self.findings.append(f"CMakeLists.txt links {pkg} outside resolver/config/")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    t = Tree(argv[1])
    t.build()
    if "--graph" in argv:
        for a, bs in sorted(t.edges().items()):
            for b in sorted(bs):
                print(f"{a} -> {b}")
    t.check_direction()
    t.check_circles()
    t.check_cmake()
    for line in t.findings:
        print(line)
    if t.findings:
        print(f"layers: {len(t.findings)} finding(s)", file=sys.stderr)
        return 1
    print(f"layers: {len(t.files)} files in {len(LAYERS)} layers, no upward include, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
