#!/usr/bin/env python3
"""check-cycles.py — no circle of files, by calls or by includes (issue 18, STYLE.md 20).

    tools/check-cycles.py SRCDIR BUILDDIR

Calls: for every object file the build made from a production source (client/, common/, daemon/, link/,
worker/, tools/, bench/), `nm` lists the symbols it defines and the ones it uses; file A depends on file B when
A uses a symbol that B defines. Includes: file A depends on header B when A says `#include "B"`. A circle is
a strongly connected component of more than one file in either graph; each is printed with one of its
cycles, and the exit status is 1 when there is any.
"""
import os
import re
import subprocess
import sys

PROD = ("client/", "common/", "daemon/", "link/", "worker/", "tools/", "bench/")


def objects(srcdir, builddir):
    """Map source path (relative) -> object files built from it (libtool .o and plain .o)."""
    out = {}
    for root, _dirs, files in os.walk(builddir):
        for f in files:
            if not f.endswith(".o"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(root, builddir)
            if rel.endswith(".libs"):
                continue  # libtool PIC copies: the plain .o beside it is the same source
            if rel.startswith(("tests", "build")) or rel == ".":
                continue
            # automake names objects <dir>/<prefix>-<file>.o or <dir>/<file>.o
            base = f[:-2]
            if "-" in base and not os.path.exists(os.path.join(srcdir, rel, base + ".c")):
                base = base.split("-", 1)[1]
            src = os.path.normpath(os.path.join(rel, base + ".c"))
            if not os.path.exists(os.path.join(srcdir, src)):
                continue
            out.setdefault(src, []).append(path)
    return out


def nm(path):
    r = subprocess.run(["nm", "--defined-only", "-g", path], capture_output=True, text=True)
    defs = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    r = subprocess.run(["nm", "-u", path], capture_output=True, text=True)
    uses = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    return defs, uses


def sccs(graph):
    index, low, stack, on, res, counter = {}, {}, [], set(), [], [0]

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
                res.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return res


def one_cycle(graph, comp):
    comp = set(comp)
    start = min(comp)
    # BFS from start back to start inside the component
    prev, frontier, seen = {}, [start], {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in comp and w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def main():
    src, build = sys.argv[1], sys.argv[2]
    bad = 0
    # --- calls ---
    objs = {s: o for s, o in objects(src, build).items() if s.startswith(PROD)}
    defs, uses = {}, {}
    for s, paths in objs.items():
        d, u = set(), set()
        for p in paths:
            a, b = nm(p)
            d |= a
            u |= b
        defs[s], uses[s] = d, u
    owner = {}
    for s, d in defs.items():
        for sym in d:
            owner.setdefault(sym, set()).add(s)
    calls = {}
    why = {}
    for s, u in uses.items():
        for sym in u:
            for t in owner.get(sym, ()):
                if t != s:
                    calls.setdefault(s, set()).add(t)
                    why.setdefault((s, t), sym)
    for comp in sccs(calls):
        bad = 1
        cyc = one_cycle(calls, comp)
        steps = " -> ".join("%s (%s)" % (a, why[(a, b)]) for a, b in zip(cyc, cyc[1:]))
        print("call circle among %d files: %s\n  e.g. %s -> %s" % (len(comp), " ".join(comp), steps, cyc[-1]))
    # --- includes ---
    inc = {}
    rx = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for top in PROD:
        d = os.path.join(src, top)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            rel = top + f
            with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
                for name in rx.findall(fh.read()):
                    for cand in (os.path.normpath(top + name), os.path.normpath(name), "common/" + name,
                                 "link/" + name):
                        if os.path.exists(os.path.join(src, cand)):
                            inc.setdefault(rel, set()).add(cand)
                            break
    for comp in sccs(inc):
        bad = 1
        cyc = one_cycle(inc, comp)
        print("include circle among %d files: %s\n  e.g. %s" % (len(comp), " ".join(comp), " -> ".join(cyc)))
    if not bad:
        print("check-cycles: no circle of files by calls (%d files) or includes (%d files)" % (len(objs), len(inc)))
    return bad


if __name__ == "__main__":
    sys.exit(main())
