#!/usr/bin/env python3
"""CPU forward latency: Scorch (`scorch-run run`) against onnxruntime on the same models and inputs.

    python3 bench/forward_vs_ort.py [--scorch-run build/scorch-run] [--threads T] [--repeat N]
                                    [--rounds R] [--models resnet50,gpt2] [--out-dir bench/results]

Models, generated with `scorch-run gen` into a scratch folder:
  resnet50  ResNet-50, full width, batch 1, 3x224x224
  gpt2      GPT-2 small (12 layers, 12 heads, dim 768, vocab 50257), batch 1, 128 tokens

Each model is first run once by both engines and the outputs compared (a benchmark of a wrong
result is meaningless). Then, R rounds alternating the two engines so that machine noise hits both
alike: `scorch-run run --repeat N --threads T` (which prints its median latency) and N timed
onnxruntime runs (CPUExecutionProvider, intra_op_num_threads=T, sequential execution) after one
warm-up run. The reported latency is the median over rounds of each round's median.

Writes bench/results/<date>-cpu-forward.md (a table) and .json (the same numbers, with the
machine and versions).
"""
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

from bench_common import check_selection, cpu_bench_parser, run_meta, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = {
    "resnet50": {
        "title": "ResNet-50, batch 1, 224x224",
        "gen": "resnet --depth 50 --image 224",
        "run": [],
    },
    "gpt2": {
        "title": "GPT-2 small, batch 1, seq 128",
        "gen": "gpt --preset small",  # vocab 50257, positions 1024; run binds seq 128
        "run": ["--seq", "128"],
    },
}


def sh(cmd, capture=False):
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), file=sys.stderr, flush=True)
    r = subprocess.run([str(c) for c in cmd], capture_output=capture, text=True)
    if r.returncode != 0:
        if capture:
            sys.stderr.write(r.stdout + r.stderr)
        sys.exit(f"forward_vs_ort: command failed ({r.returncode}): {cmd[0]} {cmd[1]}")
    return (r.stdout + r.stderr) if capture else ""


def make_inputs(sess, tmp, seq):
    """Seeded inputs for batch 1: floats ~ N(0,1), integer inputs as token ids below 50257."""
    rng = np.random.default_rng(0)
    feeds, files = {}, []
    for m in sess.get_inputs():
        shape = [d if isinstance(d, int) and d >= 0 else (1 if i == 0 else seq) for i, d in enumerate(m.shape)]
        if m.type == "tensor(float)":
            arr = rng.standard_normal(shape).astype(np.float32)
        elif m.type == "tensor(int64)":
            arr = rng.integers(0, 50257, shape).astype(np.int64)
        else:
            sys.exit(f"forward_vs_ort: input {m.name} has unhandled type {m.type}")
        path = os.path.join(tmp, f"in_{len(files)}.npy")
        np.save(path, arr)
        feeds[m.name] = arr
        files.append(f"{m.name}={path}")
    return feeds, files


def scorch_cmd(args, model, spec, files):
    cmd = [args.scorch_run, "run", model, "--batch", "1", "--threads", args.threads, *spec["run"]]
    for f in files:
        cmd += ["--input", f]
    return cmd


def scorch_median_ms(text):
    """The median latency scorch-run prints, in ms (accepts 'median ... X ms' or 'median ... X us/s')."""
    m = re.search(r"median[^0-9\n]*([0-9]+(?:\.[0-9]+)?)\s*(ms|us|s)\b", text, re.I)
    if not m:
        sys.exit(f"forward_vs_ort: no median latency in scorch-run's output:\n{text}")
    v = float(m.group(1))
    return {"ms": v, "us": v / 1000.0, "s": v * 1000.0}[m.group(2)]


def check_outputs(args, model, spec, files, sess, feeds, tmp):
    out_dir = os.path.join(tmp, "out")
    os.makedirs(out_dir, exist_ok=True)
    sh(scorch_cmd(args, model, spec, files) + ["--output-dir", out_dir], capture=True)
    worst = 0.0
    for o, ref in zip(sess.get_outputs(), sess.run(None, feeds)):
        got = np.load(os.path.join(out_dir, o.name + ".npy"))
        if got.shape != ref.shape:
            sys.exit(f"forward_vs_ort: output {o.name}: scorch {got.shape}, onnxruntime {ref.shape}")
        err = float(np.max(np.abs(got.astype(np.float64) - ref)))
        # Deep random-weight models accumulate rounding differently per engine: judge the error
        # against the output's scale rather than element by element.
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        if not err <= 1e-3 * scale + 1e-4:
            sys.exit(f"forward_vs_ort: output {o.name} disagrees with onnxruntime "
                     f"(max abs err {err:.3g}, max |output| {scale:.3g})")
        worst = max(worst, err)
    return worst


def ort_median_ms(sess, feeds, repeat):
    sess.run(None, feeds)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def bench_model(args, key, tmp):
    spec = MODELS[key]
    model = os.path.join(tmp, key + ".onnx")
    sh([args.scorch_run, "gen", *shlex.split(spec["gen"]), "-o", model])
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    # The same session with spin-waiting off: scorch-run's OpenMP threads spin only briefly before
    # sleeping (GOMP_SPINCOUNT=10000, tools/runtime_env.c), and on a loaded machine the wait policy
    # alone moves the ratio by 2x or more either way, so both ORT settings are reported; the ratio
    # uses the faster of the two.
    so_ns = ort.SessionOptions()
    so_ns.intra_op_num_threads = args.threads
    so_ns.inter_op_num_threads = 1
    so_ns.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so_ns.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess_ns = ort.InferenceSession(model, so_ns, providers=["CPUExecutionProvider"])
    seq = int(spec["run"][1]) if "--seq" in spec["run"] else 1
    feeds, files = make_inputs(sess, tmp, seq)
    max_err = check_outputs(args, model, spec, files, sess, feeds, tmp)
    ours, spin, nospin = [], [], []
    for r in range(args.rounds):
        out = sh(scorch_cmd(args, model, spec, files) + ["--repeat", args.repeat], capture=True)
        ours.append(scorch_median_ms(out))
        spin.append(ort_median_ms(sess, feeds, args.repeat))
        nospin.append(ort_median_ms(sess_ns, feeds, args.repeat))
        print(f"{key} round {r + 1}/{args.rounds}: scorch {ours[-1]:.2f} ms, onnxruntime {spin[-1]:.2f} ms "
              f"(no spinning {nospin[-1]:.2f} ms), load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    s, os_, on = statistics.median(ours), statistics.median(spin), statistics.median(nospin)
    o = min(os_, on)
    return {"model": key, "title": spec["title"], "scorch_ms": round(s, 3), "ort_ms": round(o, 3),
            "ort_spin_ms": round(os_, 3), "ort_nospin_ms": round(on, 3),
            "ratio": round(s / o, 3), "scorch_rounds_ms": [round(x, 3) for x in ours],
            "ort_spin_rounds_ms": [round(x, 3) for x in spin], "ort_nospin_rounds_ms": [round(x, 3) for x in nospin],
            "max_abs_err": max_err}


def write_results(args, rows):
    date = subprocess.run(["date", "+%F"], capture_output=True, text=True).stdout.strip()
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"{date}-cpu-forward")
    meta = run_meta(date, args.threads, args.load_start, repeat=args.repeat, rounds=args.rounds,
                    onnxruntime=ort.__version__, scorch_run=os.path.abspath(args.scorch_run))
    write_json(stem, meta, rows)
    lines = [
        f"# CPU forward latency, {date}",
        "",
        f"Machine: {meta['machine']} ({meta['cores']} logical CPUs), {args.threads} thread(s); "
        f"onnxruntime {ort.__version__}. Median of {args.rounds} alternating rounds, each the median of "
        f"{args.repeat} runs. Load average (1/5/15 min) at start {meta['loadavg_start']}, at end "
        f"{meta['loadavg_end']}.",
        "",
        f"Command: `{meta['command']}`",
        "",
        "| model | Scorch (ms) | ORT default (ms) | ORT no spinning (ms) | Scorch / best ORT | max abs diff |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['title']} | {r['scorch_ms']:.2f} | {r['ort_spin_ms']:.2f} | {r['ort_nospin_ms']:.2f} | "
                     f"{r['ratio']:.2f} | {r['max_abs_err']:.2g} |")
    lines += ["", "```json", json.dumps({"meta": meta, "results": rows}, indent=2), "```", ""]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {stem}.md and {stem}.json", file=sys.stderr)
    print("\n".join(lines[:8 + len(rows)]))


def main():
    ap = cpu_bench_parser(__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--models", default="resnet50,gpt2")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    keys = [k for k in args.models.split(",") if k]
    check_selection("forward_vs_ort", keys, MODELS, args.scorch_run)
    args.load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="scorch-bench-") as tmp:
        rows = [bench_model(args, k, tmp) for k in keys]
    write_results(args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
