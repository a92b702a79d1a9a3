#!/usr/bin/env python3
"""This machine's cost profile (train/cost_profile.h), end to end through `scorch-run plan`:

    cost_profile_check.py SCORCH_RUN WORKDIR

  - the first plan measures the profile and writes the cache file (seven positive figures), and
    plans with it (`plan --json`: cost_model "profile"); the second reads the file and predicts the
    same step time to the bit;
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
    stamp = os.path.getmtime(files[0])
    second = plan(scorch, model, cache)
    if second["predicted_time"] != first["predicted_time"] or os.path.getmtime(files[0]) != stamp:
        fail("the cached profile predicts %r, the measured one %r (file rewritten: %s)"
             % (second["predicted_time"], first["predicted_time"], os.path.getmtime(files[0]) != stamp))
    text = run(scorch, ["plan", model, "--batch", "4"], cache).stdout
    if "cost profile (cached in" not in text:
        fail("plan does not say the profile came from the cache:\n" + text)
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
    print("cost profile ok: %s; predicted %.4g s with it, %.4g s with the constants"
          % (figures, first["predicted_time"], off["predicted_time"]))


if __name__ == "__main__":
    main()
