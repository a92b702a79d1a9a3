#!/usr/bin/env python3
"""Data-parallel throughput on this machine (issue 17's benchmark): the same global batch trained as
N ranks x T/N threads (`mpirun -np N scorch-run train --batch B/N --threads T/N`) against 1 rank x T
threads (`--batch B --threads T`), measured in the same run, alternating, best of --repeats.

    python3 bench/dist_scaling.py --scorch build/scorch-run [--ranks 2] [--threads 2] [--model gpt|resnet]
                                  [--steps 20] [--repeats 3] [--csv bench/results/dist_scaling.csv] [--device cuda]

Throughput: samples (or tokens) per second over the steps after the first two (from --log's elapsed
column), so start-up, planning and the cost profile are excluded. Also runs 2 ranks with
--shard-optimizer. Prints a table and the ratios to the one-rank run.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

MODELS = {
    # a GPT whose step is long enough (~0.2 s) for per-step costs to be measured, not start-up
    "gpt": (["gpt", "--layers", "4", "--heads", "4", "--dim", "256", "--vocab", "4096", "--seq", "128"],
            ["--seq", "128", "--optimizer", "adamw"], "tokens", 128),
    "resnet": (["resnet", "--depth", "18", "--image", "64", "--classes", "10"], [], "samples", 1),
}


def run(cmd):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def throughput(log, per_sample, global_batch, skip=2):
    rows = list(csv.DictReader(open(log)))
    t0, t1 = float(rows[skip - 1]["elapsed_s"]), float(rows[-1]["elapsed_s"])
    steps = len(rows) - skip
    return steps * global_batch * per_sample / (t1 - t0), (t1 - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scorch", default="build/scorch-run")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--model", default="gpt", choices=sorted(MODELS))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for one GPU per rank (NCCL)")
    a = ap.parse_args()
    gen, extra, unit, per_sample = MODELS[a.model]
    scorch = os.path.abspath(a.scorch)
    work = tempfile.mkdtemp(prefix="dist_scaling_")
    model = os.path.join(work, "model.onnx")
    run([scorch, "gen"] + gen + ["-o", model])
    n, t = a.ranks, a.threads
    configs = [
        ("1 rank x %d threads" % t, 1, t, a.batch, []),
        ("%d ranks x %d thread%s" % (n, t // n, "" if t // n == 1 else "s"), n, max(1, t // n), a.batch // n, []),
        ("%d ranks, --shard-optimizer" % n, n, max(1, t // n), a.batch // n, ["--shard-optimizer"]),
    ]
    best = {}
    for rep in range(a.repeats):
        for name, ranks, threads, batch, more in configs:
            log = os.path.join(work, "log.csv")
            cmd = [scorch, "train", model, "--batch", str(batch), "--threads", str(threads), "--steps", str(a.steps),
                   "--log", log, "-o", os.path.join(work, "out.onnx"), "--device", a.device] + extra + more
            if ranks > 1:
                cmd = [a.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
            run(cmd)
            rate, step = throughput(log, per_sample, a.batch)
            if rate > best.get(name, (0, 0))[0]:
                best[name] = (rate, step)
    base = best[configs[0][0]][0]
    print(f"model {a.model} ({' '.join(gen[1:])}), global batch {a.batch}, {a.steps} steps, best of {a.repeats}; "
          f"{os.cpu_count()} cores")
    print(f"{'configuration':32s} {unit + '/s':>12s} {'s/step':>9s} {'vs 1 rank':>10s}")
    rows = []
    for name, *_ in configs:
        rate, step = best[name]
        print(f"{name:32s} {rate:12.1f} {step:9.4f} {rate / base:10.2f}x")
        rows.append({"model": a.model, "configuration": name, "rate": f"{rate:.1f}", "unit": unit,
                     "s_per_step": f"{step:.4f}", "vs_one_rank": f"{rate / base:.3f}"})
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
