#!/usr/bin/env python3
"""An exact oracle for Scorch's checkpointing planner: Checkmate's MILP (Jain et al., "Checkmate:
Breaking the Memory Wall with Optimal Tensor Rematerialization", MLSys 2020), solved with HiGHS.

    milp_oracle.py SCORCH_RUN MODEL.onnx [--batch N] [--seq N] [--fractions 0.9,0.7,0.5]
                   [--time-limit S] [--csv FILE]

For each budget (a fraction of the store-everything activation peak, plus the fixed region) it
plans with `scorch-run plan --strategy auto --json` (remat only) and solves the MILP on the graph
`plan --graph` exports: the same nodes, the same modelled node times (schedule/cost.h) and the same
arena bytes per value. It prints the planner's predicted step time against the MILP optimum (or, if
the time limit stops the solver, against its proven lower bound, which only overstates the gap).

The MILP (T = n stages; stage t computes node t for the first time and may recompute earlier ones):
    R[t,i]  node i runs in stage t (i <= t; R[t,t] = 1)
    S[t,i]  node i's outputs are resident when stage t starts (i < t)
    FREE[t,i,k]  node i's outputs are freed right after node k runs in stage t (k = i or a user of i)
  minimise  sum_t sum_i R[t,i] time_i
  subject to
    R[t,k] <= R[t,j] + S[t,j]                     each input j of k (the input is there when k runs)
    S[t+1,i] <= S[t,i] + R[t,i]                   what stage t+1 starts with was there or was made
    FREE[t,i,k] = R[t,k] (1 - S[t+1,i]) prod_{users j of i, k < j <= t} (1 - R[t,j]),  linearised with
        the hazard count h = (1 - R[t,k]) + S[t+1,i] + sum R[t,j]: 1 - FREE <= h <= (2 + #j)(1 - FREE)
    U[t,0] = sum_{i<t} S[t,i] m_i + R[t,0] m_0
    U[t,k] = U[t,k-1] - sum_{i in deps(k-1) + {k-1}} m_i FREE[t,i,k-1] + R[t,k] m_k
    U[t,k] <= budget - fixed bytes                 memory after node k runs, before it frees
Scorch's space is narrower, and so is the oracle's here in one respect: backward nodes and the
optimizer updates run once, in graph order (an update rewrites its parameter in place, so running it
again would apply it twice); any forward node may be recomputed in any stage. Values that are graph
outputs (the loss, BatchNormalization's running statistics) are kept from their first run to the end.
The MILP does not model the executor's in-place kernels (an element-wise output taking its input's
buffer), so at the same budget it may find no plan where the planner does; those rows say so.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def load_graph(path):
    """The planner's graph: per node its time and activation input / output values; per activation
    value its bytes, producer, readers and whether it is kept to the end (a graph output)."""
    g = json.load(open(path))
    nodes, values = g["nodes"], g["values"]
    producer = {}
    for k, n in enumerate(nodes):
        for v in n["out"]:
            producer[v] = k
    acts = sorted(v for v in producer if values[v]["bytes"] > 0)
    bytes_ = {v: values[v]["bytes"] for v in acts}
    ins = [sorted({v for v in n["in"] if v in bytes_}) for n in nodes]
    outs = [[v for v in n["out"] if v in bytes_] for n in nodes]
    # a node whose input is an alias output (bytes 0, an in-place update) depends on nothing here
    readers = {v: [] for v in acts}
    for k, vs in enumerate(ins):
        for v in vs:
            readers[v].append(k)
    return {"n": len(nodes), "n_forward": g["n_forward"], "fixed": g["fixed_bytes"], "time": [n["time"] for n in nodes],
            "ins": ins, "outs": outs, "bytes": bytes_, "producer": producer, "readers": readers,
            "keep": {v: values[v]["output"] for v in acts}}


def store_all_peak(G):
    """Activation peak of running every node once, each value freed after its last reader, in the
    MILP's memory model (no in-place kernels)."""
    last = {v: max(r) if r else G["producer"][v] for v, r in G["readers"].items()}
    peak = 0
    for k in range(G["n"]):
        live = sum(b for v, b in G["bytes"].items()
                   if G["producer"][v] <= k and (last[v] >= k or G["keep"][v]))
        peak = max(peak, live)
    return peak


def solve(G, budget_act, time_limit=60.0, threads=1):
    """Minimum total node time of a schedule within budget_act activation bytes. Returns
    (status, objective, lower_bound, seconds): status 'optimal', 'limit' (time limit: objective is
    the best found or None, lower_bound the proven bound) or 'infeasible'."""
    import highspy
    n, F = G["n"], G["n_forward"]
    # the objective in microseconds: node times in seconds (3e-8 s for a Reshape of the test graphs) sit
    # below HiGHS's optimality tolerances (1e-7), which then took a recompute for free
    US = 1e6
    tm = [x * US for x in G["time"]]
    ins, outs, nbytes = G["ins"], G["outs"], G["bytes"]
    prod, readers, keep = G["producer"], G["readers"], G["keep"]
    last = {v: max(r) if r else -1 for v, r in readers.items()}
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", threads)
    h.setOptionValue("mip_rel_gap", 1e-6)
    h.setOptionValue("mip_abs_gap", 0.0)
    binary = highspy.HighsVarType.kInteger
    R, S = {}, {}
    # R[t,i]: forward nodes may be recomputed where something in or after stage t can read them;
    # the rest run once, in their own stage. S[t,v]: value v kept into stage t while a node at or
    # after t still reads it (or it is a graph output).
    for t in range(n):
        R[t, t] = 1
        for i in range(min(t, F)):
            rd = [k for v in outs[i] for k in readers[v]]
            if any(k >= t or i < k < min(t, F) for k in rd):
                R[t, i] = h.addVariable(0, 1, tm[i], binary)
    for v in nbytes:
        for t in range(prod[v] + 1, n):
            if keep[v] or last[v] >= t:
                S[t, v] = h.addVariable(0, 1, 0, binary)
    h.changeObjectiveOffset(sum(tm))

    def r(t, i):
        return R.get((t, i), 0)

    def s(t, v):
        return S.get((t, v), 0) if t < n else (1 if keep[v] else 0)

    def lin(terms):
        expr, c = None, 0.0
        for a, x in terms:
            if isinstance(x, int):
                c += a * x
            else:
                expr = a * x if expr is None else expr + a * x
        return expr, c

    def at_most(terms, hi):
        expr, c = lin(terms)
        if expr is None:
            return c <= hi + 1e-9
        h.addConstr(expr <= hi - c)
        return True

    for t in range(n):
        for k in range(t + 1):
            for v in ins[k]:  # the input is there when k runs: R[t,k] <= R[t,prod v] + S[t,v]
                if not at_most([(1, r(t, k)), (-1, r(t, prod[v])), (-1, s(t, v))], 0):
                    return "infeasible", None, None, 0.0
        for v in nbytes:
            if prod[v] <= t and t + 1 < n and (t + 1, v) in S:  # S[t+1,v] <= S[t,v] + R[t,prod v]
                at_most([(1, s(t + 1, v)), (-1, s(t, v)), (-1, r(t, prod[v]))], 0)
            if keep[v] and prod[v] <= t and t + 1 < n:  # graph outputs stay from their first run
                h.addConstr(S[t + 1, v] >= 1)
    for t in range(n):
        u = [(nbytes[v], s(t, v)) for v in nbytes if prod[v] < t and not isinstance(s(t, v), int)]
        for k in range(t + 1):
            u += [(nbytes[v], r(t, k)) for v in outs[k]]
            if not at_most(u, float(budget_act)):
                return "infeasible", None, None, 0.0
            # after node k: free its inputs and outputs that no later node of the stage reads and that
            # the next stage does not keep
            for v in ins[k] + outs[k]:
                if keep[v]:
                    continue
                later = [j for j in readers[v] if k < j <= t]
                hz_expr, hz_c = lin([(-1, r(t, k)), (1, s(t + 1, v))] + [(1, r(t, j)) for j in later])
                hz_c += 1  # (1 - R[t,k]) + S[t+1,v] + sum R[t,j]
                if hz_expr is None:
                    if hz_c == 0:
                        u.append((-nbytes[v], 1))
                    continue
                fr = h.addVariable(0, 1, 0, binary)
                maxh = 2 + len(later)
                h.addConstr(hz_expr + fr >= 1 - hz_c)             # 1 - FREE <= hazards
                h.addConstr(hz_expr + maxh * fr <= maxh - hz_c)   # hazards <= max (1 - FREE)
                u.append((-nbytes[v], fr))
    t0 = time.time()
    h.run()
    secs = time.time() - t0
    ms = h.getModelStatus()
    info = h.getInfo()
    if ms == highspy.HighsModelStatus.kInfeasible:
        return "infeasible", None, None, secs
    obj = info.objective_function_value / US if info.primal_solution_status == 2 else None
    if ms == highspy.HighsModelStatus.kOptimal:
        return "optimal", obj, obj, secs
    return "limit", obj, info.mip_dual_bound / US, secs


def plan_json(scorch, model, extra):
    p = subprocess.run([scorch, "plan", model, "--json"] + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode
    return json.loads(p.stdout), None


def compare(scorch, model, dims, fractions, time_limit, strategy="auto"):
    """Rows: fraction, budget, planner time, MILP status/optimum/bound, gap."""
    with tempfile.TemporaryDirectory() as tmp:
        gpath = os.path.join(tmp, "graph.json")
        none, err = plan_json(scorch, model, dims + ["--graph", gpath])
        if none is None:
            sys.exit("plan failed: " + err)
        G = load_graph(gpath)
    fixed, act = none["fixed_bytes"], none["activation_peak"]
    none["milp_store_all_peak"] = store_all_peak(G)
    status, opt, _, _ = solve(G, none["milp_store_all_peak"], time_limit)
    none["milp_store_all_time"] = opt if status == "optimal" else None
    none["milp_nodes"] = G["n"]
    rows = []
    for f in fractions:
        budget = fixed + int(f * act)
        p, err = plan_json(scorch, model, dims + ["--memory", str(budget), "--strategy", strategy, "--offload", "none"])
        ours = None if p is None else p["compute_time"]  # recompute_time is a part of it
        status, opt, bound, secs = solve(G, budget - G["fixed"], time_limit)
        ref = opt if status == "optimal" else bound
        gap = None if ours is None or ref is None or ref <= 0 else ours / ref - 1
        rows.append({"fraction": f, "budget": budget, "planner": ours, "planner_error": err, "milp": status,
                     "optimum": opt, "bound": bound, "seconds": secs, "gap": gap,
                     "strategy": p["strategy"] if p else None, "nodes": G["n"]})
    return none, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scorch")
    ap.add_argument("model")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--seq")
    ap.add_argument("--fractions", default="0.9,0.7,0.5,0.35")
    ap.add_argument("--time-limit", type=float, default=120)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--csv")
    a = ap.parse_args()
    dims = ["--batch", a.batch] + (["--seq", a.seq] if a.seq else [])
    none, rows = compare(a.scorch, a.model, dims, [float(x) for x in a.fractions.split(",")], a.time_limit, a.strategy)
    print("%s: %d nodes, fixed %d B, store-everything activations %d B, step %.6g s (modelled)"
          % (a.model, rows[0]["nodes"], none["fixed_bytes"], none["activation_peak"], none["predicted_time"]))
    print("%-8s %12s %-9s %12s %-9s %12s %8s %7s" % ("share", "budget", "planner", "time", "milp", "optimum", "gap", "solve"))
    for r in rows:
        print("%-8.2f %12d %-9s %12s %-9s %12s %8s %6.1fs" % (
            r["fraction"], r["budget"], r["strategy"] or "-", "%.6g" % r["planner"] if r["planner"] else "none",
            r["milp"], "%.6g" % (r["optimum"] if r["optimum"] is not None else r["bound"] or 0),
            "%+.1f%%" % (100 * r["gap"]) if r["gap"] is not None else "-", r["seconds"]))
    if a.csv:
        import csv
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
