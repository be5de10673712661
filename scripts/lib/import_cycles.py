#!/usr/bin/env python3
"""Import circles between the source files of each crate.

Usage: scripts/lib/import_cycles.py [--edges] [crates/NAME ...]

An edge A -> B means file A names an item of the module that lives in file B
(`use crate::b::X`, `crate::b::X` in an expression, `super::b::X`, `child::X`).
The module tree itself is not an edge: a parent module (a `mod.rs`, the crate
root) holds what its children share and dispatches into them, so only edges
between files neither of which contains the other count. A circle is a
strongly connected set of two or more files. Exits 1 when any crate has one.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def strip(src: str) -> str:
    """Source without comments, string literals and char literals."""
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r'r(#*)".*?"\1', '""', src, flags=re.S)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"'(?:\\.|[^'\\])'", "''", src)
    return src


def module_of(path: Path, src_dir: Path) -> tuple:
    rel = path.relative_to(src_dir).with_suffix("")
    parts = list(rel.parts)
    if parts in (["lib"], ["main"]):
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def expand(tree: str) -> list:
    """Paths named by a `use` tree (`a::{b, c::{d, e}}`)."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix: str, t: str):
        i = t.find("{")
        if i < 0:
            for alt in t.split(","):
                if alt:
                    out.append(prefix + alt)
            return
        head, body = t[:i], t[i + 1 : t.rfind("}")]
        depth, start, items = 0, 0, []
        for j, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(body[start:j])
                start = j + 1
        items.append(body[start:])
        for item in items:
            walk(prefix + head, item)

    walk("", tree)
    return [re.split(r"\s*as\s*|::\*$", p)[0] for p in out]


def edges_of(path: Path, src_dir: Path, modules: dict) -> set:
    me = module_of(path, src_dir)
    src = strip(path.read_text())
    is_root = me == ()
    names = []
    for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", src):
        if is_root and m.group(1):
            continue
        names.extend(expand(m.group(2)))
    body = re.sub(r"\buse\s+[^;]+;", "", src)
    names.extend(m.group(0) for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", body))
    children = set(re.findall(r"\bmod\s+(\w+)\s*;", src))
    if children:
        names.extend(
            m.group(0)
            for m in re.finditer(r"(?<![\w:])(?:%s)(?:::\w+)+" % "|".join(sorted(children)), body)
        )
    targets = set()
    for name in names:
        parts = name.split("::")
        if parts[0] == "crate":
            base, rest = (), parts[1:]
        elif parts[0] in ("super", "self"):
            base, rest = me, parts
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        elif parts[0] in children:
            base, rest = me, parts
        else:
            continue
        full = base + tuple(rest)
        for k in range(len(full), -1, -1):
            if full[:k] in modules:
                if modules[full[:k]] != path:
                    targets.add(modules[full[:k]])
                break
    return targets



def tarjan(graph: dict) -> list:
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def crate_graph(crate: Path) -> dict:
    src_dir = crate / "src"
    files = sorted(src_dir.rglob("*.rs"))
    modules = {module_of(f, src_dir): f for f in files}
    mod_of = {f: m for m, f in modules.items()}
    graph = {}
    for f in files:
        # The module tree is not an edge: a parent holds what its children
        # share and dispatches into them. Circles count between files neither
        # of which contains the other.
        graph[f] = {
            t
            for t in edges_of_file(f, src_dir, modules)
            if not contains(mod_of[f], mod_of[t]) and not contains(mod_of[t], mod_of[f])
        }
    return graph


def contains(outer: tuple, inner: tuple) -> bool:
    return inner[: len(outer)] == outer


def edges_of_file(f: Path, src_dir: Path, modules: dict) -> set:
    """Edges of one file; an inline `mod tests { use super::* }` is the file itself."""
    src = strip(f.read_text())
    me = module_of(f, src_dir)
    targets = set()
    # Split off inline modules: their `super` is this file's module.
    inline = list(re.finditer(r"\bmod\s+(\w+)\s*\{", src))
    if inline:
        # Text of the file outside its inline modules is treated as usual; the
        # inline modules' `super::` paths resolve against this file's module.
        for m in inline:
            start = m.end()
            depth, j = 1, start
            while j < len(src) and depth:
                depth += {"{": 1, "}": -1}.get(src[j], 0)
                j += 1
            inner = src[start : j - 1]
            inner = re.sub(r"\bsuper::", "self::", inner)
            src = src[: m.start()] + inner + src[j:]
    tmp = _Virtual(f, src)
    return edges_of(tmp, src_dir, modules) - {f}


class _Virtual(type(Path())):
    """A path whose text is given (the file with its inline modules flattened)."""

    def __new__(cls, path, text):
        obj = super().__new__(cls, path)
        obj._text = text
        return obj

    def read_text(self, *args, **kwargs):
        return self._text


def main(argv):
    show_edges = "--edges" in argv
    crates = [Path(a) for a in argv if not a.startswith("--")]
    if not crates:
        crates = sorted(p.parent for p in (ROOT / "crates").glob("*/src"))
    circles = 0
    for crate in crates:
        crate = crate.resolve()
        graph = crate_graph(crate)
        src_dir = crate / "src"
        rel = lambda p: str(Path(p).relative_to(src_dir))
        if show_edges:
            for a in sorted(graph):
                for b in sorted(graph[a]):
                    print(f"{crate.name}: {rel(a)} -> {rel(b)}")
        for comp in tarjan(graph):
            circles += 1
            print(f"{crate.name}: circle of {len(comp)} files: {', '.join(rel(p) for p in comp)}")
            for a in comp:
                back = sorted(rel(b) for b in graph[a] if b in comp)
                print(f"    {rel(a)} -> {', '.join(back)}")
    print(f"{circles} import circle(s) in {len(crates)} crate(s)")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
