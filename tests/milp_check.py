#!/usr/bin/env python3
"""The planner against the exact MILP oracle (bench/milp_oracle.py, Checkmate's formulation solved by
HiGHS) on small training graphs: a one-block GPT, a small ResNet and random DAGs (seeded) of
MatMul/Add/Mul/Relu/Tanh nodes with skip connections.

    milp_check.py SCORCH_RUN WORKDIR

What must hold (the oracle is only useful if it is right):
  - with room for every activation (the MILP's own store-everything peak) the MILP's optimum is the
    store-everything step the planner predicts: the same nodes and node times, no recompute;
  - the MILP's memory model is not more generous than the planner's: its store-everything peak is
    at least the planner's activation peak (it keeps a node's outputs as one block and has no
    in-place kernels), so a schedule it finds under a budget is not one the executor could not run;
  - the planner stays within CEILING of the oracle where both schedule, and plans wherever the MILP
    schedules: guards against regressions, at the gaps measured with eviction plans
    (schedule/evict.c; bench/results/2026-11-27-evict.md).
What it reports: the gap at 90%, 70% and 50% of the planner's store-everything activation peak.
The issue's target is within 5% everywhere: with eviction plans all 11 budgets are, the worst
+4.5% (resnet-2 at 70%); before them (refinement only) 5 of 8 were, the worst +17%, and at 3 budgets
the planner found no plan where the MILP schedules.
Fails through the exit code."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
import milp_oracle  # noqa: E402

TARGET = 0.05   # the frontier's goal, reported
CEILING = 0.10  # +10%: the regression guard (the worst measured with eviction plans was +4.5%)
FRACTIONS = [0.9, 0.7, 0.5]
TIME_LIMIT = 60


def random_dag(path, seed, n_ops=24, width=16):
    """x [N, width] -> n_ops nodes, each reading one or two earlier values (skips included) -> y."""
    rng = np.random.default_rng(seed)
    vals, nodes, inits = ["x"], [], []
    for k in range(n_ops):
        op = rng.choice(["MatMul", "Add", "Mul", "Relu", "Tanh"], p=[0.35, 0.2, 0.15, 0.15, 0.15])
        a = vals[-1] if rng.random() < 0.6 else vals[rng.integers(0, len(vals))]
        out = "v%d" % k
        if op == "MatMul":
            w = "w%d" % k
            inits.append(numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), w))
            nodes.append(helper.make_node("MatMul", [a, w], [out], name="n%d" % k))
        elif op in ("Add", "Mul"):
            b = vals[rng.integers(0, len(vals))]
            nodes.append(helper.make_node(op, [a, b], [out], name="n%d" % k))
        else:
            nodes.append(helper.make_node(op, [a], [out], name="n%d" % k))
        vals.append(out)
    nodes.append(helper.make_node("Identity", [vals[-1]], ["y"], name="out"))
    g = helper.make_graph(nodes, "dag%d" % seed, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    scorch, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(work, exist_ok=True)
    cases = []
    gpt = os.path.join(work, "gpt.onnx")
    subprocess.run([scorch, "gen", "gpt", "--layers", "1", "--heads", "2", "--dim", "16", "--vocab", "32", "--seq", "8",
                    "-o", gpt], check=True, capture_output=True)
    cases.append(("gpt-1", gpt, ["--batch", "2", "--seq", "8"], [0.9]))  # 130 nodes: one budget solves in ~30 s
    res = os.path.join(work, "resnet.onnx")
    subprocess.run([scorch, "gen", "resnet", "--depth", "2", "--width", "4", "--image", "16", "--classes", "4",
                    "-o", res], check=True, capture_output=True)
    cases.append(("resnet-2", res, ["--batch", "8"], FRACTIONS))
    for seed in (1, 2, 3):
        p = os.path.join(work, "dag%d.onnx" % seed)
        random_dag(p, seed)
        cases.append(("dag-%d" % seed, p, ["--batch", "64"], FRACTIONS))
    failures, compared, over, missed = [], 0, 0, 0
    for name, model, dims, fractions in cases:
        none, rows = milp_oracle.compare(scorch, model, dims, fractions, TIME_LIMIT)
        print("%s: %d nodes, planner activation peak %d B (MILP model %d B), store-everything %.6g s (MILP %s)"
              % (name, none["milp_nodes"], none["activation_peak"], none["milp_store_all_peak"], none["predicted_time"],
                 "%.6g" % none["milp_store_all_time"] if none["milp_store_all_time"] else "unsolved"))
        t_none, t_milp = none["predicted_time"], none["milp_store_all_time"]
        if t_milp is None or abs(t_milp - t_none) > 1e-6 * t_none:
            failures.append("%s: with room for everything the MILP's optimum is %s, the store-everything step %.9g"
                            % (name, t_milp, t_none))
        if none["milp_store_all_peak"] < none["activation_peak"]:
            failures.append("%s: the MILP's store-everything peak %d is below the planner's %d: its memory model "
                            "is more generous than the executor" % (name, none["milp_store_all_peak"], none["activation_peak"]))
        for r in rows:
            ref = r["optimum"] if r["milp"] == "optimal" else r["bound"]
            print("  %.0f%%: planner %s (%s), MILP %s %s (%.1fs), gap %s" % (
                100 * r["fraction"], "%.6g" % r["planner"] if r["planner"] else "no plan",
                r["strategy"], r["milp"], "%.6g" % ref if ref is not None else "-", r["seconds"],
                "%+.1f%%" % (100 * r["gap"]) if r["gap"] is not None else "-"))
            if r["milp"] == "infeasible":
                continue
            if r["planner"] is None:
                missed += 1
                failures.append("%s at %.0f%%: the MILP schedules and the planner finds no plan" % (name, 100 * r["fraction"]))
                continue
            compared += 1
            over += r["gap"] is not None and r["gap"] > TARGET
            if r["gap"] is not None and r["gap"] > CEILING:
                failures.append("%s at %.0f%%: planner %.6g s is %.1f%% over the MILP's %.6g s (ceiling %+.0f%%)"
                                % (name, 100 * r["fraction"], r["planner"], 100 * r["gap"], ref, 100 * CEILING))
    print("%d budgets compared: %d over the %.0f%% target; at %d more the MILP schedules and the planner finds no plan"
          % (compared, over, 100 * TARGET, missed))
    for f in failures:
        print("FAIL:", f)
    if not compared:
        failures.append("no budget was compared")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
