#!/usr/bin/env python3
"""f16 element-wise throughput: one model of Cast f32->f16 (x2), Add, Mul, Max and Cast f16->f32 on
2^23 elements, timed by `scorch-run run --repeat N --profile` (per-op milliseconds per pass).

usage: half_ops.py SCORCH_RUN [SCORCH_RUN ...] [--repeat N] [--workdir DIR]
Prints one table row per binary, so two builds (before/after a change) compare in one run.
"""
import argparse
import os
import re
import subprocess

import numpy as np
import onnx
from onnx import TensorProto as T, helper


def model(path, n):
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=T.FLOAT16, name="c1"),
             helper.make_node("Cast", ["y"], ["k"], to=T.FLOAT16, name="c2"),
             helper.make_node("Add", ["h", "k"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "k"], ["m"], name="mul"),
             helper.make_node("Max", ["m", "h"], ["mx"], name="max"),
             helper.make_node("Cast", ["mx"], ["out"], to=T.FLOAT, name="c3")]
    g = helper.make_graph(nodes, "half_ops", [helper.make_tensor_value_info("x", T.FLOAT, [n]),
                                              helper.make_tensor_value_info("y", T.FLOAT, [n])],
                          [helper.make_tensor_value_info("out", T.FLOAT, [n])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scorch", nargs="+")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--workdir", default=".")
    a = ap.parse_args()
    n = 1 << 23
    os.makedirs(a.workdir, exist_ok=True)
    path = os.path.join(a.workdir, "half_ops.onnx")
    model(path, n)
    r = np.random.default_rng(0)
    for name in "xy":
        np.save(os.path.join(a.workdir, name + ".npy"), r.standard_normal(n).astype(np.float32))
    print("| binary | Cast x3 ms | Add ms | Mul ms | Max ms | pass ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in a.scorch:
        out = subprocess.run([s, "run", path, "--input", "x=" + os.path.join(a.workdir, "x.npy"), "--input",
                              "y=" + os.path.join(a.workdir, "y.npy"), "--repeat", str(a.repeat), "--profile"],
                             capture_output=True, text=True, check=True).stdout
        ms = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+)\s+\d+\s+([\d.]+)", out, re.M)}
        lat = re.search(r"latency median ([\d.]+) ms", out).group(1)
        print("| %s | %.2f | %.2f | %.2f | %.2f | %s |" % (s, ms.get("Cast", 0), ms.get("Add", 0), ms.get("Mul", 0),
                                                        ms.get("Max", 0), lat))


if __name__ == "__main__":
    main()
