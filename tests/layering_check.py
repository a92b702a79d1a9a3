#!/usr/bin/env python3
"""The stages only look downstream (tests/layering.cmake): a library file may include headers of its
own stage and of the stages before it, never of a later one. The order is the flow of a model
through the code:

    core < graph < import < autodiff < schedule < backends < train < api < tools

(core: errors, tensors, files; graph: the IR and its passes; import: ONNX to IR; autodiff: the
training graph; schedule: plans; backends: executing them; train: the session; api: the public
library; tools: scorch-run). So constant folding in graph/ takes its evaluator from the caller and
the atomic write lives in core/; train/ reaches a device only through the backend vtable, never a
backend's own headers. Fails listing every upward include, and every library file over
MAX_LINES lines (a file that long holds more than one idea: split it by what its parts do).

  layering_check.py SOURCE_DIR
"""
import os
import re
import sys

ORDER = ["core", "graph", "import", "autodiff", "schedule", "backends", "train", "api", "tools"]
RANK = {d: i for i, d in enumerate(ORDER)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
MAX_LINES = 600
# Stages above backends/ reach a device only through the backend vtable (backends/backend.h): these
# may not include one backend's own headers.
VTABLE_ONLY = {"train"}
BACKEND_PRIVATE = ("backends/cpu/", "backends/cuda/")


def main():
    root = sys.argv[1]
    bad, files = [], 0
    for stage in ORDER:
        for dirpath, _, names in os.walk(os.path.join(root, stage)):
            for name in sorted(names):
                if not name.endswith((".c", ".h", ".cu", ".cuh", ".def")):
                    continue
                path = os.path.join(dirpath, name)
                files += 1
                with open(path, errors="replace") as f:
                    lines = f.readlines()
                    if len(lines) > MAX_LINES:
                        bad.append("%s has %d lines, over %d" % (os.path.relpath(path, root), len(lines), MAX_LINES))
                    for line_no, line in enumerate(lines, 1):
                        m = INCLUDE.match(line)
                        top = m.group(1).split("/")[0] if m else None
                        if top in RANK and RANK[top] > RANK[stage]:
                            bad.append("%s:%d includes %s (%s is after %s)" %
                                       (os.path.relpath(path, root), line_no, m.group(1), top, stage))
                        if m and stage in VTABLE_ONLY and m.group(1).startswith(BACKEND_PRIVATE):
                            bad.append("%s:%d includes %s (%s/ reaches devices through backends/backend.h only)" %
                                       (os.path.relpath(path, root), line_no, m.group(1), stage))
    if files < 50:
        print("FAIL: only %d library files found under %s" % (files, root))
        return 1
    for b in bad:
        print("FAIL: " + b)
    if bad:
        return 1
    print("layering: %d files, every include points to its own stage or an earlier one, none over %d lines" %
          (files, MAX_LINES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
