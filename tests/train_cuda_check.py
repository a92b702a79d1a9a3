#!/usr/bin/env python3
"""Training on the CUDA backend against the CPU, and every plan on it against `none`.

usage: train_cuda_check.py SCORCH_RUN [--emulated-memory SIZE]   (tests/cuda.cmake, label cuda)

For a ResNet, a DRANet (the well-conditioned configuration of tests/e2e/README.md) and a GPT made
by `scorch-run gen` (also with its tied table as row blocks, --param-block): 10 steps of `scorch-run train` on the CPU and with --device cuda must give
losses within 1e-3 (relative, fp32 on both, different summation orders; batch sizes and learning
rates where 10 steps stay well-conditioned: at batch 4 a ResNet's loss differences jump from 1e-6
to 1e-2 in one step, a max-pool tie or a BatchNorm over 4 values flipping); with --device cuda,
checkpointing and streaming plans (sqrt + offload weights, dc + offload both under a --memory cap)
must write an ONNX file byte-identical to the none plan's: the CUDA kernels are deterministic
(no atomics in any gradient), so a recomputed node repeats its bits and a transfer copies them.
The CUDA runs also show the image batch going over the link from pinned buffers (at least its bytes
unstaged) and 9 of 10 steps taking a batch prefetched during the step before.
The same in mixed precision (--precision bf16 / fp16: cuBLAS's and cuDNN's 16-bit paths for the
products and convolutions, f32 kernels on widened copies for the rest, cu_widen.cu), with one change: an f32 result
a few ulp apart can round to another 16-bit value, and that difference then grows like any
perturbation, so the losses are held to the spread s that 16 bits has against fp32 on the CPU (a
third run, worst relative difference over the steps): the CUDA run in 16 bits must be within 3s of
both the CPU's fp32 and 16-bit losses (two runs each within s of fp32 can differ by 2s; measured:
1.3-1.9s against fp32, 0.3-1.3s against the CPU in 16 bits).
With --emulated-memory (builds on the CPU emulator of CUDA only, whose device memory
SCORCH_CUDA_EMU_MEMORY sets): on a GPU that small, `train` without --memory must say that the none
plan does not fit, re-plan for the free memory and still write the same bytes as the roomy run.
Without a CUDA device (or a build without the CUDA backend) prints SKIP and exits 77. On a machine
without a GPU it runs on the CPU emulator of CUDA (tests/cuda_emu) when the build uses it.
"""
import csv
import os
import re
import subprocess
import sys

SCORCH = sys.argv[1]
EMU_MEMORY = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--emulated-memory" else None
STEPS = "10"
MODELS = {
    "resnet": (["resnet", "--depth", "18", "--width", "8", "--image", "64", "--classes", "10"], ["--batch", "8", "--lr", "0.001"]),
    "dranet": (["dranet", "--depth", "50", "--image", "16", "--classes", "5", "--width", "4", "--gamma", "0.1",
                "--residual-gamma", "0.1"], ["--batch", "8", "--lr", "0.001"]),
    "gpt": (["gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--vocab", "64", "--seq", "16"],
            ["--batch", "4", "--seq", "16"]),
    # the tied table as 2 row blocks (autodiff/param_blocks.c): the blocks' Gemms, Concat and masked
    # Gathers on the device, each block streamed alone
    "gpt_blocks": (["gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--vocab", "64", "--seq", "16"],
                   ["--batch", "4", "--seq", "16", "--param-block", "2KiB"]),
}
# mixed precision: the model above and the precision
LOW = {"gpt_bf16": ("gpt", "bf16"), "gpt_fp16": ("gpt", "fp16"), "resnet_bf16": ("resnet", "bf16"),
       "dranet_bf16": ("dranet", "bf16")}
for low, (base, prec) in LOW.items():
    MODELS[low] = (MODELS[base][0], MODELS[base][1] + ["--precision", prec])
PLANS = {
    "sqrt-weights": ["--strategy", "sqrt", "--offload", "weights"],
    "dc-both": ["--strategy", "dc", "--offload", "both"],
}
failures = 0


def run(args, env=None):
    p = subprocess.run([SCORCH] + args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print("FAIL: scorch-run %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr[-3000:]))
        sys.exit(1)
    return p


def losses(path):
    with open(path) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg)
    failures += not ok


def train(name, extra, tag, device):
    args = ["train", name + ".onnx"] + extra + ["--steps", STEPS, "--seed", "3", "--device", device,
                                                 "--log", tag + ".csv", "-o", tag + ".onnx"]
    return run(args)


def peak_of(out):
    for line in out.splitlines():
        if line.startswith("plan ") and "peak planned" in line:
            return int(line.split("peak planned ")[1].split()[0])
    return None


# The image batch of each image model (f32 [8, 3, S, S]): bytes that must cross the link unstaged.
IMAGE_BATCH = {"resnet": 8 * 3 * 64 * 64 * 4, "dranet": 8 * 3 * 16 * 16 * 4}


def link_checks(name, out):
    """The batch crosses the link from pinned feed buffers (train_feed_buffer): of a step's bytes
    moved, at least the image batch went unstaged (before the feeds were pinned every byte was
    staged; what still is: outputs, running statistics, fp16's rollback copy). And each step after
    the first takes the batch the prefetch worker drew during the one before (on for a GPU)."""
    moved = re.search(r"measured h2d (\d+) d2h (\d+) \(feeds and outputs included; (\d+) staged\)", out)
    hits = re.search(r"prefetch: (\d+) of (\d+) steps", out)
    if name in IMAGE_BATCH:
        h2d, d2h, staged = (int(g) for g in moved.groups()) if moved else (0, 0, 0)
        check(moved is not None and h2d + d2h - staged >= IMAGE_BATCH[name],
              "%s: --device cuda stages %d of %d + %d bytes a step (the %d-byte image batch goes unstaged)" %
              (name, staged, h2d, d2h, IMAGE_BATCH[name]))
    check(hits is not None and hits.group(1) == str(int(STEPS) - 1),
          "%s: --device cuda: %s" % (name, hits.group(0) if hits else "no prefetch line"))


def small_gpu():
    """The GPT on an emulated GPU too small for its none plan: re-planned, same bytes."""
    env = dict(os.environ, SCORCH_CUDA_EMU_MEMORY=EMU_MEMORY)
    p = run(["train", "gpt.onnx"] + MODELS["gpt"][1] + ["--steps", STEPS, "--seed", "3", "--device", "cuda",
                                                       "-o", "gpt-small.onnx"], env=env)
    said = "planning for" in p.stderr and "does not fit" not in p.stderr
    with open("gpt-small.onnx", "rb") as f, open("gpt-cuda.onnx", "rb") as g:
        same = f.read() == g.read()
    plan = [l for l in p.stderr.splitlines() if l.startswith("plan ")]
    check(said and same, "gpt on a %s GPU without --memory: %s; %s; weights %s the roomy run's" %
          (EMU_MEMORY, "re-planned" if said else "NOT re-planned", plan[0] if plan else "no plan line",
           "byte-identical to" if same else "DIFFER from"))


def main():
    run(["gen"] + MODELS["gpt"][0] + ["-o", "gpt.onnx"])
    p = subprocess.run([SCORCH, "train", "gpt.onnx"] + MODELS["gpt"][1] + ["--steps", "1", "--device", "cuda", "-o",
                        "probe.onnx"], capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIP: --device cuda does not run here: %s" % (p.stderr.strip().splitlines() or ["?"])[-1])
        sys.exit(77)
    for name, (gen, extra) in MODELS.items():
        run(["gen"] + gen + ["-o", name + ".onnx"])
        train(name, extra, name + "-cpu", "cpu")
        out = train(name, extra, name + "-cuda", "cuda")
        a, b = losses(name + "-cpu.csv"), losses(name + "-cuda.csv")
        worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
        tol, far, why = 1e-3, 0.0, ""
        if name in LOW:
            train(name, MODELS[LOW[name][0]][1], name + "-cpu32", "cpu")
            f32 = losses(name + "-cpu32.csv")
            spread = max(abs(x - y) / abs(y) for x, y in zip(a, f32))
            far = max(abs(x - y) / abs(y) for x, y in zip(b, f32))
            tol, why = 3 * spread, "; %.2e from the cpu's fp32 losses (3x %s's spread there, %.2e)" % (
                far, LOW[name][1], spread)
        check(len(a) == len(b) == int(STEPS) and max(worst, far) <= tol,
              "%s: %s steps cuda vs cpu, losses %.6f -> %.6f / %.6f -> %.6f, worst relative difference %.2e%s, <= %.2e" %
              (name, STEPS, a[0], a[-1], b[0], b[-1], worst, why, tol))
        peak = peak_of(out.stderr + out.stdout)
        link_checks(name, out.stdout)
        with open(name + "-cuda.onnx", "rb") as f:
            ref = f.read()
        for plan, args in PLANS.items():
            cap = ["--memory", str(peak * 3 // 4)] if plan == "dc-both" and peak else []
            o = train(name, extra + args + cap, "%s-%s" % (name, plan), "cuda")
            with open("%s-%s.onnx" % (name, plan), "rb") as f:
                same = f.read() == ref
            check(same, "%s: --device cuda %s%s: weights %s the none plan's (plan peak %s bytes)" %
                  (name, " ".join(args), " " + " ".join(cap) if cap else "", "byte-identical to" if same else "DIFFER from",
                   peak_of(o.stderr + o.stdout)))
    if EMU_MEMORY:
        small_gpu()
    print("%d failure(s)" % failures if failures else "PASS")
    sys.exit(1 if failures else 0)


main()
