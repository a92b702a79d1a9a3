#!/usr/bin/env python3
"""bench/train_vs_torch_gpu.py --smoke-cpu, checked (registered by tests/gpu_bench.cmake).

usage: gpu_bench_check.py SCORCH_RUN BENCH_SCRIPT

Runs the GPU bench at its smoke sizes on the CPU (both engines; no GPU needed) for the GPT and the
streaming case in fp32 and bf16, then checks its JSON: every row measured (no error), both engines'
step times positive, bf16 rows run with `--precision bf16`, and the streaming rows carry what the
device session reports for the open issues: the capped run's predicted against measured step time
(train's "plan ..." line), its bytes moved each way and how many of them were staged ("moved per
step: ... measured h2d H d2h D (...; N staged)").
Skips (exit 0, saying so) when PyTorch is not importable.
"""
import glob
import json
import os
import subprocess
import sys

SCORCH, BENCH = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print("SKIP: PyTorch is not importable (%s)" % e)
        return
    out = os.path.abspath("gpu_bench_out")
    for f in glob.glob(os.path.join(out, "*")):
        os.remove(f)
    cmd = [sys.executable, BENCH, "--smoke-cpu", "--scorch-run", SCORCH, "--models", "gpt2,stream", "--tf32", "on",
           "--precision", "fp32,bf16", "--steps", "4", "--warmup", "1", "--out-dir", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
    print(p.stdout[-3000:], p.stderr[-2000:])
    if p.returncode:
        fail("the bench exited %d" % p.returncode)
    files = glob.glob(os.path.join(out, "*-gpu-train-cpu-smoke.json"))
    if len(files) != 1 or not os.path.exists(files[0][:-5] + ".md"):
        fail("expected one <date>-gpu-train-cpu-smoke .json and .md in %s, found %s" % (out, os.listdir(out)))
    with open(files[0]) as f:
        rows = json.load(f)["results"]
    got = [(r["model"], r["precision"]) for r in rows]
    want = [("gpt2", "fp32"), ("gpt2", "bf16"), ("stream", "fp32"), ("stream", "bf16")]
    if got != want:
        fail("rows %s, expected %s" % (got, want))
    for r in rows:
        what = "%s %s" % (r["model"], r["precision"])
        if "error" in r:
            fail("%s: %s" % (what, r["error"]))
        if not (r["scorch_ms"] > 0 and r["torch_ms"] > 0):
            fail("%s: step times %r (ours) and %r (PyTorch)" % (what, r["scorch_ms"], r["torch_ms"]))
        if ("--precision %s" % r["precision"]) not in r["scorch_command"]:
            fail("%s: our command lacks --precision %s: %s" % (what, r["precision"], r["scorch_command"]))
        if r["model"] == "stream":
            if not (r.get("capped_predicted_ms", 0) > 0 and r.get("capped_predicted_vs_measured", 0) > 0):
                fail("%s: no predicted step time parsed from the capped run's plan line: %s" % (what, r))
            if not (r.get("stream_h2d_bytes", 0) > 0 and r.get("stream_d2h_bytes", 0) > 0):
                fail("%s: no bytes moved parsed from the capped run's output: %s" % (what, r))
            staged = r.get("stream_staged_bytes")
            if not (isinstance(staged, int) and 0 <= staged <= r["stream_h2d_bytes"] + r["stream_d2h_bytes"]):
                fail("%s: staged bytes %r not parsed, or more than the bytes moved: %s" % (what, staged, r))
    print("PASS: %d rows" % len(rows))


main()
