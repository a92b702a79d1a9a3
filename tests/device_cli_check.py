#!/usr/bin/env python3
"""`scorch-run train/run --device` end to end (registered by tests/device_cli.cmake).

usage: device_cli_check.py SCORCH_RUN HAS_CUDA    (HAS_CUDA: 1 when the CUDA backend is built)

Without a GPU (forced with CUDA_VISIBLE_DEVICES="", so these checks run the same on any machine):
  --device cuda stops before training with exit code 1, names why (no CUDA support in this build,
  or the CUDA runtime's error text) and writes nothing; --device auto (and no --device) trains on
  the CPU and says so; --device cpu gives bit-identical weights to auto there; a bad --device value
  is a usage error (exit 2); `run --device cuda` fails the same way (exit 1, the reason) while
  `run --device cpu|auto` works; `plan --device cuda` fails the same way, `plan --device auto`
  plans for the CPU (the same plan and prediction as plain `plan`), `plan --device tpu` is a usage
  error.
When the CUDA backend is built and a GPU is visible: auto picks it, --device cuda trains on it
(plain, with --memory above the GPU's free memory, and with --tf32), and its losses follow the CPU
run's (relative 1e-3 per step, fp32 on both), and `run --device cuda` gives the CPU's logits; the
GPU's node shapes are timed on it into kernel-shapes-gpu-<model>*.txt in the cache folder, which the
next run reads without measuring again, and so does `plan --device cuda --measure 1`, which names
the GPU and compares its prediction with the steps' wall time.
"""
import json
import csv
import os
import subprocess
import sys

SCORCH, HAS_CUDA = sys.argv[1], sys.argv[2] == "1"
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="")
GEN = ["gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--vocab", "64", "--seq", "16"]
TRAIN = ["m.onnx", "--batch", "4", "--seq", "16", "--steps", "5", "--lr", "0.01"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(args, env=None):
    p = subprocess.run([SCORCH] + args, capture_output=True, text=True, env=env)
    print("$ scorch-run %s -> %d" % (" ".join(args), p.returncode))
    return p


def expect(p, rc, text, where):
    if p.returncode != rc:
        fail("%s: exit code %d, expected %d\nstdout: %s\nstderr: %s" % (where, p.returncode, rc, p.stdout, p.stderr))
    if text and text not in p.stdout + p.stderr:
        fail("%s: output lacks %r\nstdout: %s\nstderr: %s" % (where, text, p.stdout, p.stderr))


def losses(path):
    with open(path) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def without_gpu():
    for f in ("cuda.onnx",):
        if os.path.exists(f):
            os.remove(f)
    p = run(["train"] + TRAIN + ["--device", "cuda", "-o", "cuda.onnx"], env=NO_GPU)
    expect(p, 1, "--device cuda: ", "--device cuda without a GPU")
    why = "no usable CUDA device (" if HAS_CUDA else "this build has no CUDA support"
    expect(p, 1, why, "--device cuda without a GPU")
    if HAS_CUDA and "no usable CUDA device ()" in p.stderr:
        fail("--device cuda: the reason from the CUDA runtime is empty: %s" % p.stderr)
    if os.path.exists("cuda.onnx") or "training " in p.stderr:
        fail("--device cuda without a GPU started training or wrote a model")

    p = run(["train"] + TRAIN + ["--device", "auto", "-o", "auto.onnx", "--log", "auto.csv"], env=NO_GPU)
    expect(p, 0, "training m.onnx on cpu:", "--device auto without a GPU")
    expect(p, 0, "over 5 steps on cpu", "--device auto without a GPU")
    p = run(["train"] + TRAIN + ["-o", "default.onnx"], env=NO_GPU)
    expect(p, 0, "over 5 steps on cpu", "no --device without a GPU")
    p = run(["train"] + TRAIN + ["--device", "cpu", "-o", "cpu.onnx", "--log", "cpu.csv"], env=NO_GPU)
    expect(p, 0, "training m.onnx on cpu:", "--device cpu")
    if read("cpu.onnx") != read("auto.onnx") or read("cpu.onnx") != read("default.onnx"):
        fail("--device cpu, --device auto and no --device (all on the CPU) trained different weights")
    l = losses("cpu.csv")
    if len(l) != 5 or not l[-1] < l[0]:
        fail("--device cpu: the loss did not go down over 5 steps: %s" % l)
    # --tf32 is accepted on the CPU and changes nothing there
    p = run(["train"] + TRAIN + ["--device", "cpu", "--tf32", "-o", "tf32.onnx"], env=NO_GPU)
    expect(p, 0, "on cpu", "--device cpu --tf32")
    if read("tf32.onnx") != read("cpu.onnx"):
        fail("--tf32 changed the weights trained on the CPU")

    for bad in ("gpu", "CUDA", ""):
        p = run(["train"] + TRAIN + ["--device", bad])
        expect(p, 2, "--device must be cpu, cuda or auto", "--device %r" % bad)

    p = run(["run", "m.onnx", "--seq", "16", "--device", "cuda"], env=NO_GPU)
    expect(p, 1, "--device cuda: ", "run --device cuda without a GPU")
    p = run(["run", "m.onnx", "--seq", "16", "--device", "tpu"])
    expect(p, 2, "--device must be cpu, cuda or auto", "run --device tpu")
    for d in ("cpu", "auto"):
        p = run(["run", "m.onnx", "--seq", "16", "--device", d, "--output-dir", "run_" + d], env=NO_GPU)
        expect(p, 0, "logits f32[1,16,64]", "run --device " + d)
    plan_without_gpu()


PLAN = ["plan", "m.onnx", "--batch", "4", "--seq", "16"]


def plan_without_gpu():
    p = run(PLAN + ["--device", "cuda"], env=NO_GPU)
    expect(p, 1, "--device cuda: ", "plan --device cuda without a GPU")
    p = run(PLAN + ["--device", "tpu"])
    expect(p, 2, "--device must be cpu, cuda or auto", "plan --device tpu")
    # the built-in constants: a cost profile measured on a busy machine may be measured again between
    # the two runs (its drift probe), which would change the prediction, not the plan
    constants = dict(NO_GPU, SCORCH_COST_PROFILE="off")
    plain = run(PLAN + ["--json"], env=constants)
    auto = run(PLAN + ["--json", "--device", "auto"], env=constants)
    expect(plain, 0, None, "plan --json")
    expect(auto, 0, None, "plan --json --device auto")
    a, b = json.loads(plain.stdout), json.loads(auto.stdout)
    if b["device"] != "cpu" or a["device"] != "cpu":
        fail("plan --device auto without a GPU: device %r (plain plan: %r), expected cpu" % (b["device"], a["device"]))
    for k in ("peak_bytes", "predicted_time", "steps"):
        if k in a and a[k] != b[k]:
            fail("plan --device auto on the CPU: %s %r, plain plan %r" % (k, b[k], a[k]))


def with_gpu():
    probe = run(["train"] + TRAIN + ["--steps", "1", "-o", "probe.onnx"])
    if "on cuda" not in probe.stderr:
        expect(probe, 0, "on cpu", "auto")
        print("GPU checks skipped: no CUDA device visible (auto trained on the CPU)")
        return
    cpu = losses("cpu.csv")
    for extra in ([], ["--memory", "1TiB"], ["--tf32"]):
        p = run(["train"] + TRAIN + ["--device", "cuda", "-o", "gpu.onnx", "--log", "gpu.csv"] + extra)
        expect(p, 0, "training m.onnx on cuda:", "--device cuda " + " ".join(extra))
        expect(p, 0, "over 5 steps on cuda", "--device cuda " + " ".join(extra))
        gpu = losses("gpu.csv")
        tol = 1e-2 if extra == ["--tf32"] else 1e-3
        for i, (a, b) in enumerate(zip(cpu, gpu)):
            if abs(a - b) > tol * abs(a):
                fail("--device cuda %s: step %d loss %.6g, the CPU's %.6g" % (" ".join(extra), i + 1, b, a))
        if len(gpu) != len(cpu):
            fail("--device cuda: %d logged steps, expected %d" % (len(gpu), len(cpu)))
    gpu_shape_cache()
    p = run(["run", "m.onnx", "--seq", "16", "--device", "cuda", "--output-dir", "run_cuda"])
    expect(p, 0, "logits f32[1,16,64]", "run --device cuda")
    import numpy as np
    a, b = np.load("run_cpu/logits.npy"), np.load("run_cuda/logits.npy")
    if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
        fail("run --device cuda: logits differ from the CPU's by %g" % float(np.abs(a - b).max()))
    print("GPU checks passed")


def gpu_shape_cache():
    """The GPU's node times: its shapes timed on the device and cached per GPU model, read back by the
    next run without measuring again (its file unchanged)."""
    import glob
    import tempfile
    cache = tempfile.mkdtemp(prefix="scorch_gpu_cache_")
    env = dict(os.environ, SCORCH_CACHE_DIR=cache)
    env.pop("SCORCH_COST_PROFILE", None)
    texts = []
    for _ in range(2):
        p = run(["train"] + TRAIN + ["--steps", "2", "--device", "cuda", "-o", "gpu_cost.onnx"], env=env)
        expect(p, 0, "over 2 steps on cuda", "--device cuda with the cost cache")
        files = glob.glob(os.path.join(cache, "kernel-shapes-gpu-*.txt"))
        if len(files) != 1:
            fail("--device cuda: expected one kernel-shapes-gpu-<model> file in %s, found %s" % (cache, os.listdir(cache)))
        texts.append(read(files[0]).decode())
    rows = texts[0].splitlines()
    if not rows[0].startswith("scorch kernel shapes") or len(rows) < 20 or not any(r.startswith("MatMul:") for r in rows):
        fail("the GPU's kernel-shape cache has %d lines, no MatMul shape or no format line:\n%s" % (len(rows), texts[0][:500]))
    for r in rows[1:]:  # "key warm cold"; a GPU's are one figure twice (its L2 is not flushed)
        warm, cold = (float(x) for x in r.rsplit(" ", 2)[1:])
        if not (warm > 0 and cold == warm):
            fail("the GPU's kernel-shape cache has a row without one positive time twice: %s" % r)
    if texts[1] != texts[0]:
        fail("the second run measured again instead of reading the GPU's kernel-shape cache")
    print("GPU kernel shapes: %d timed on the device and cached in %s" % (len(rows) - 1, os.path.basename(files[0])))
    p = run(PLAN + ["--device", "cuda", "--measure", "1"], env=env)
    expect(p, 0, "device         cuda (", "plan --device cuda --measure 1")
    expect(p, 0, "(median of 1 steps after a warm-up)", "plan --device cuda --measure 1")
    expect(p, 0, "error          prediction ", "plan --device cuda --measure 1")
    if read(files[0]).decode() != texts[0]:
        fail("plan --device cuda measured the GPU's shapes again instead of reading train's cache")


def main():
    p = run(["gen"] + GEN + ["-o", "m.onnx"])
    expect(p, 0, None, "gen")
    without_gpu()
    if HAS_CUDA:
        with_gpu()
    else:
        print("GPU checks skipped: this build has no CUDA backend")
    print("PASS")


main()
