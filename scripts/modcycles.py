#!/usr/bin/env python3
"""Import loops between the modules of one crate or Python package: the tree should
tell the data flow, so a module never imports (directly or through others) from a
module that imports it.

    scripts/modcycles.py CRATE_SRC_DIR|PYTHON_PACKAGE_DIR [--under MOD] [--depth N] [--strict]

A directory with an `__init__.py` is a Python package: each .py file is a module
(`__init__.py` is the package itself), and an edge runs to every module of the package
it imports (`import pkg.a`, `from pkg.a import b`, `from . import b`, `from .a import c`,
at any indentation: an import inside a function still ties the two). Otherwise:

Each .rs file under CRATE_SRC_DIR is a module (src/a.rs and src/a/mod.rs are `a`,
src/a/b.rs is `a::b`; src/main.rs and src/bin/ are binaries, left out). An edge runs
from a module to every module it names through `crate::…`, `super::…`, `self::…`
or child-relative paths, in
`use` items (braces expanded) and in expressions. Paths are resolved to the longest
module prefix that exists, then cut to --depth segments (default: whole paths).
--under keeps modules inside MOD (e.g. `service`). Edges between a module and its own
ancestors (a child's `super::` use of its parent, a parent's re-export of its child)
are left out unless --strict: a parent and its children are one room. --skip REGEX
leaves out modules whose path matches (test-only modules: `--skip 'tests$|^testing'`).

Prints each strongly connected component of two or more modules (a loop), then the
count; exits 1 if there is any.
"""

import argparse
import os
import re
import sys


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[0] in ("main", "bin"):
        return None
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (aliases and `self` handled)."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        path = tree.split("as")[0] if "as" in tree and "::" in tree else tree
        path = re.sub(r"::self$", "", path)
        return [path] if path else []
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for e in expand(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def references(text):
    text = strip_comments(text)
    refs = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        refs.extend(expand(m.group(1)))
    refs.extend(re.findall(r"\b((?:crate|super)(?:::(?:super|\w+))+)", text))
    return [r for r in refs if "::" in r]


def python_references(text, here, package):
    """Module paths (tuples) a Python module's imports name, within `package`."""
    text = re.sub(r'("""|\'\'\')(.*?)\1', "", text, flags=re.S)
    text = re.sub(r"#[^\n]*", "", text)
    # A relative import starts from the module's own package; `from X import n` names
    # X.n where that is a module, else X (trimmed by the caller).
    refs = []
    for m in re.finditer(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+\(?([\w\s,.*]+)\)?", text, re.M):
        dots, mod, names = m.group(1), m.group(2), m.group(3)
        if dots:
            base = here["pkg"][: len(here["pkg"]) - (len(dots) - 1)]
        elif mod.split(".")[0] == package:
            base, mod = (), ".".join(mod.split(".")[1:])
        else:
            continue
        path = base + (tuple(mod.split(".")) if mod else ())
        for name in re.split(r"[\s,]+", names):
            name = name.split(" as ")[0].strip()
            if name and name != "*":
                refs.append(path + (name,))
    for m in re.finditer(r"^\s*import\s+([\w., ]+)", text, re.M):
        for name in m.group(1).split(","):
            name = name.split(" as ")[0].strip().split(".")
            if name and name[0] == package:
                refs.append(tuple(name[1:]))
    return refs


def python_graph(src):
    package = os.path.basename(os.path.normpath(src))
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, name), src)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    files[tuple(rel[:-1])] = (os.path.join(root, name), tuple(rel[:-1]))
                else:
                    files[tuple(rel)] = (os.path.join(root, name), tuple(rel[:-1]))
    graph = {m: set() for m in files}
    for m, (path, pkg) in files.items():
        for ref in python_references(open(path, encoding="utf-8").read(), {"pkg": pkg}, package):
            while ref and ref not in files:
                ref = ref[:-1]
            if ref != m and (ref in files):
                graph[m].add(ref)
    return graph


def resolve(ref, here, modules):
    segs = ref.split("::")
    if segs[0] == "self":
        segs = segs[1:]
        base = here
    elif segs[0] not in ("crate", "super"):
        base = here  # a `use child::…` relative to this module
    if segs and segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs and segs[0] == "super":
        base = here
        # A file module's `super` is its parent.
        while segs and segs[0] == "super":
            base = base[:-1]
            segs = segs[1:]
    path = base + tuple(segs)
    while path and path not in modules:
        path = path[:-1]
    return path


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("--under", default="")
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--skip", default="", help="regex: leave out modules whose path matches (e.g. tests)")
    a = ap.parse_args()
    if os.path.exists(os.path.join(a.src, "__init__.py")):
        graph = python_graph(a.src)
        loops = [sorted(c) for c in sccs(graph) if len(c) > 1]
        for c in sorted(loops):
            print("loop: " + " <-> ".join(".".join(x) or "__init__" for x in c))
        print(f"{len(loops)} loop(s) among {len(graph)} modules under {a.src}")
        sys.exit(1 if loops else 0)
    files = {}
    for root, _, names in os.walk(a.src):
        for name in names:
            if name.endswith(".rs"):
                p = os.path.join(root, name)
                m = module_of(a.src, p)
                if m is not None and not (a.skip and re.search(a.skip, "::".join(m))):
                    files[m] = p
    modules = set(files)
    under = tuple(a.under.split("::")) if a.under else ()

    def cut(m):
        return m[: len(under) + a.depth] if a.depth else m

    graph = {}
    for m, p in files.items():
        if m[: len(under)] != under:
            continue
        for ref in references(open(p, encoding="utf-8").read()):
            first = ref.split("::")[0]
            if first not in ("crate", "super", "self") and m + (first,) not in modules:
                continue  # another crate's path
            t = resolve(ref, m, modules)
            if t not in modules or t[: len(under)] != under:
                continue
            s, d = cut(m), cut(t)
            if s == d:
                continue
            if not a.strict and (d == s[: len(d)] or s == d[: len(s)]):
                continue
            graph.setdefault(s, set()).add(d)
            graph.setdefault(d, set())
    loops = [sorted(c) for c in sccs(graph) if len(c) > 1]
    for c in sorted(loops):
        print("loop: " + " <-> ".join("::".join(x) or "crate" for x in c))
    print(f"{len(loops)} loop(s) among {len(graph)} modules under {a.src} {a.under}".rstrip())
    sys.exit(1 if loops else 0)


if __name__ == "__main__":
    main()
