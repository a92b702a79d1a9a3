#!/usr/bin/env python3
"""No two library files depend on each other, directly or around a loop (tests/cycles.cmake).

    cycles_check.py BUILD_DIR

A file depends on another when its object uses a function or variable the other defines (nm:
undefined symbols resolved to the defining object of the scorch and scorch_cuda libraries). A cycle
means neither file can be read, tested or replaced without the other, so tables (which name every
kernel) live apart from the helpers the kernels call, a plan's type apart from its driver, and a
builder apart from what it builds. Fails naming each cycle's files and the symbols along it.
"""
import collections
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ("scorch.dir", "scorch_cuda.dir")


def objects(build):
    for target in TARGETS:
        base = os.path.join(build, "CMakeFiles", target)
        for obj in glob.glob(os.path.join(base, "**", "*.o"), recursive=True):
            src = os.path.relpath(obj, base)[: -len(".o")]
            if os.path.exists(os.path.join(ROOT, src)):  # objects of renamed files are stale
                yield src, obj


def dependencies(build):
    defined, used = {}, collections.defaultdict(set)
    for src, obj in objects(build):
        for line in subprocess.run(["nm", obj], capture_output=True, text=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRW":
                defined[parts[2]] = src
            elif len(parts) == 2 and parts[0] == "U":
                used[src].add(parts[1])
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for src, syms in used.items():
        for sym in syms:
            dst = defined.get(sym)
            if dst and dst != src:
                edges[src][dst].add(sym)
    return defined, edges


def cycles(edges):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    defined, edges = dependencies(sys.argv[1])
    files = set(defined.values())
    if len(files) < 50:
        print("FAIL: only %d library objects found under %s: build the libraries first" % (len(files), sys.argv[1]))
        return 1
    found = cycles(edges)
    for comp in found:
        print("FAIL: these files depend on each other: " + ", ".join(comp))
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print("  %s -> %s: %s" % (a, b, " ".join(sorted(edges[a][b]))))
    print("%d library files, %d dependency cycles" % (len(files), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
