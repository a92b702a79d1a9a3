#!/usr/bin/env python3
"""This machine's cost profile (train/cost_profile.h), end to end through `scorch-run plan`:

    cost_profile_check.py SCORCH_RUN WORKDIR

  - the first plan measures the profile and writes the cache file (seven positive figures), and
    plans with it (`plan --json`: cost_model "profile"); the second reads the file and predicts the
    same step time to the bit;
  - the first plan also times each Conv / ConvGrad / Gemm shape alone and writes the kernel-shape
    file (positive seconds per key); the second reads it (rewrites nothing, measures nothing);
    damaged rows of it are measured again, the rest kept;
  - a cached profile whose probe finds the machine 100x faster is measured again, and the kernel
    shapes measured under it too;
  - a damaged cache file is measured again and rewritten, not trusted and not a crash;
  - SCORCH_COST_PROFILE=off plans with the built-in constants (cost_model "constants", the
    prediction equal to the constants' own figure, model_time);
  - a cache folder that cannot be written still plans, saying the profile was not cached;
  - `train --memory` plans with the profile too.
Whether the profile predicts this machine better than the constants is a benchmark
(bench/results/2026-11-25-cost-profile.md), not a timed test. Fails through the exit code."""
import glob
import json
import os
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(scorch, args, cache, off=False):
    env = dict(os.environ, SCORCH_CACHE_DIR=cache)
    env.pop("SCORCH_COST_PROFILE", None)
    if off:
        env["SCORCH_COST_PROFILE"] = "off"
    p = subprocess.run([scorch] + args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail("scorch-run %s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def plan(scorch, model, cache, off=False):
    return json.loads(run(scorch, ["plan", model, "--batch", "4", "--json"], cache, off).stdout)


def main():
    scorch, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model, cache = os.path.join(work, "m.onnx"), os.path.join(work, "cache")
    run(scorch, ["gen", "resnet", "--depth", "2", "--width", "8", "--image", "16", "--classes", "4", "-o", model], cache)
    first = plan(scorch, model, cache)
    files = glob.glob(os.path.join(cache, "cost-profile-*.txt"))
    if first["cost_model"] != "profile" or len(files) != 1:
        fail("first plan: cost_model %s, cache files %s" % (first["cost_model"], files))
    rows = [l.split() for l in open(files[0]).read().splitlines()[1:]]
    figures = {r[0]: float(r[1]) for r in rows if len(r) == 2}
    if len(figures) < 7 or any(v <= 0 for k, v in figures.items() if k != "node_overhead") or figures.get("node_overhead", -1) < 0:
        fail("cache file %s holds %s" % (files[0], open(files[0]).read()))
    shape_files = glob.glob(os.path.join(cache, "kernel-shapes-*.txt"))
    if len(shape_files) != 1:
        fail("first plan: kernel-shape files %s" % shape_files)
    shape_lines = open(shape_files[0]).read().splitlines()
    # "key warm cold": seconds with the operands where the last run left them, and flushed
    shapes = {l.rsplit(" ", 2)[0]: [float(x) for x in l.rsplit(" ", 2)[1:]] for l in shape_lines[1:]}
    kinds = {k.split(":")[0] for k in shapes}
    if not shapes or any(min(v) <= 0 for v in shapes.values()) or not {"Conv", "ConvGrad", "Gemm"} <= kinds:
        fail("kernel-shape file %s holds %s" % (shape_files[0], shape_lines))
    # The cached profile is read back unless its probe finds the machine more than 1.5x faster or
    # slower than when it was measured (another test sharing the cores can do that): then it says
    # so, measures again, and the next plan reads that.
    for attempt in range(3):
        stamp, shape_stamp = os.path.getmtime(files[0]), os.path.getmtime(shape_files[0])
        second = plan(scorch, model, cache)
        if "measured again" not in second["cost_source"]:
            break
        print("note: the probe found the machine changed (%s); again" % second["cost_source"])
        first = second
    want = "cached in %s; %d kernel shapes timed alone: %d cached" % (files[0], len(shapes), len(shapes))
    if second["predicted_time"] != first["predicted_time"] or os.path.getmtime(files[0]) != stamp \
            or os.path.getmtime(shape_files[0]) != shape_stamp or want not in second["cost_source"]:
        fail("the cached profile predicts %r, the measured one %r (file rewritten: %s, shapes rewritten: %s; cost "
             "source %r, want %r)" % (second["predicted_time"], first["predicted_time"],
                                      os.path.getmtime(files[0]) != stamp,
                                      os.path.getmtime(shape_files[0]) != shape_stamp, second["cost_source"], want))
    text = run(scorch, ["plan", model, "--batch", "4"], cache).stdout
    if "cost model     this machine's cost profile (" not in text:
        fail("plan's text does not say where its node times came from:\n" + text)
    # As above, a probe that finds the machine changed (another test on the cores) measures every
    # row again, the damaged one among them: then damage the new file and look again.
    for attempt in range(3):
        shape_lines = open(shape_files[0]).read().splitlines()
        damaged = shape_lines[:2] + [shape_lines[2].rsplit(" ", 1)[0] + " -3"] + shape_lines[3:]
        with open(shape_files[0], "w") as f:
            f.write("\n".join(damaged) + "\nnot a row\n")
        text = run(scorch, ["plan", model, "--batch", "4"], cache).stdout
        if "measured again (the cached one said" not in text:
            break
        print("note: the probe found the machine changed while the damaged row was read; again")
    want = "%d cached, 1 measured now in" % (len(shapes) - 1)
    rows = open(shape_files[0]).read().splitlines()
    if want not in text or len(rows) != len(shape_lines) or "not a row" in rows or any(r.endswith(" -3") for r in rows):
        fail("a damaged kernel-shape row was not measured again (%s):\n%s\n%s" % (want, text, rows))
    # A profile that no longer describes the machine (measured beside a heavy job: 100x slow) fails
    # its probe; it and the kernel shapes measured under it (the shape file's format line says at what
    # rate) are measured again.
    lines = open(files[0]).read().splitlines()
    with open(files[0], "w") as f:
        for l in lines:
            k = l.split()
            f.write("%s %.17g\n" % (k[0], float(k[1]) / 100) if k[0] == "conv_flops" else l + "\n")
    rows = open(shape_files[0]).read().splitlines()
    head = rows[0].split()
    with open(shape_files[0], "w") as f:
        f.write("\n".join([" ".join(head[:-1] + ["%.17g" % (float(head[-1]) / 100)])] + rows[1:]) + "\n")
    slow = plan(scorch, model, cache)
    if "measured again (the cached one said" not in slow["cost_source"] \
            or "0 cached, %d measured now" % len(shapes) not in slow["cost_source"] \
            or "were measured when the profile's 3x3 convolution ran at" not in slow["cost_source"]:
        fail("a profile 100x off the machine was not measured again with its shapes: %s" % slow["cost_source"])
    header = open(files[0]).read().splitlines()[0]
    with open(files[0], "w") as f:
        f.write(header + "\nconv_flops -1 garbage\n")
    text = run(scorch, ["plan", model, "--batch", "4"], cache).stdout
    if "measured now, cached in" not in text or "garbage" in open(files[0]).read():
        fail("a damaged cache was not measured again and rewritten:\n" + text)
    off = plan(scorch, model, cache, off=True)
    if off["cost_model"] != "constants" or off["predicted_time"] != off["model_time"]:
        fail("SCORCH_COST_PROFILE=off: cost_model %s, predicted %r, constants %r"
             % (off["cost_model"], off["predicted_time"], off["model_time"]))
    if off["predicted_time"] == first["predicted_time"]:
        fail("the profile and the constants predict the same step: the profile changed nothing")
    text = run(scorch, ["plan", model, "--batch", "4"], "/proc/no-such-folder/cache").stdout
    if "measured now, not cached" not in text:
        fail("an unwritable cache folder:\n" + text)
    p = run(scorch, ["train", model, "--batch", "4", "--steps", "1", "--memory", "64MiB", "-o",
                     os.path.join(work, "t.onnx")], cache)
    print("cost profile ok: %s, %d kernel shapes; predicted %.4g s with it, %.4g s with the constants"
          % (figures, len(shapes), first["predicted_time"], off["predicted_time"]))


if __name__ == "__main__":
    main()
