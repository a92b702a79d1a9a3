#!/usr/bin/env python3
"""`--calibrate` and `--measure` of `scorch-run plan`, `bench` and `train` end to end (train/calibrate.h).

Usage: plan_calibrate_check.py SCORCH_RUN (run in an empty working folder).

Checks, on a small generated GPT:
  - `plan --measure 2 --json`: executed, not calibrated; predicted, model and measured times positive,
    and predicted == model (no calibration: both are the cost model's figure); the steps ran on the
    given thread count, and without --threads on one fixed count, all cores (the count the cost
    profile is measured for), not on train's per-step choice, which would time some of them on one
    thread against a prediction for all;
  - `plan --calibrate --json`: calibrated; its prediction differs from the cost model's and lies
    within a factor 2 of the plan's measured kernel time (both on the thread CPU clock, measured on
    this machine a moment ago), the plan fits the budget;
  - `plan --calibrate` text output names the calibration and both prediction errors;
  - `bench --calibrate` prints the calibrated prediction column, plain `bench` does not;
  - `train --calibrate` without a plan is a usage error (exit 2); with --memory it trains and reports
    the calibration on stderr;
  - --help of plan, train and bench documents --calibrate.
Fails through the exit code.
"""
import json
import subprocess
import sys

exe = sys.argv[1]
failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)


def run(*args, code=0):
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    check(p.returncode == code, f"{' '.join(args)}: exit {p.returncode}, want {code}\n{p.stdout}\n{p.stderr}")
    return p


run("gen", "gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--vocab", "64", "--seq", "16", "-o", "g.onnx")
common = ["g.onnx", "--batch", "2", "--seq", "16", "--threads", "1"]

none = json.loads(run("plan", *common, "--json").stdout)
budget = none["fixed_bytes"] + (none["planned_peak"] - none["fixed_bytes"]) * 7 // 10
plan_args = [*common, "--memory", str(budget), "--strategy", "optimal"]

m = json.loads(run("plan", *plan_args, "--measure", "2", "--json").stdout)
check(not m["calibrated"], "--measure alone says calibrated")
check(m["measured_steps"] == 2 and m["measured_time"] > 0 and m["measured_kernel_time"] > 0,
      f"--measure: no measured time: {m}")
check(m["predicted_time"] > 0 and m["model_time"] > 0, "--measure: no predictions")
check(m["measured_threads"] == 1, f"--measure --threads 1 ran on {m['measured_threads']} threads")
unthreaded = [*common[:-2], "--memory", str(budget), "--strategy", "optimal"]
free = json.loads(run("plan", *unthreaded, "--measure", "1", "--json").stdout)
check(free["measured_threads"] >= 1, f"--measure without --threads ran on {free['measured_threads']} threads "
      "(0: chosen per step), want one fixed count")
check(abs(m["timeline_time"] - m["model_time"]) <= 1e-9 * m["model_time"],
      f"uncalibrated: timeline {m['timeline_time']} != model {m['model_time']}")

c = json.loads(run("plan", *plan_args, "--calibrate", "--json").stdout)
check(c["calibrated"], "--calibrate: not calibrated")
check(c["measured_time"] > 0 and c["measured_steps"] == 3, f"--calibrate: measured {c['measured_time']}")
check(c["planned_peak"] <= budget, f"--calibrate: plan of {c['planned_peak']} over the budget {budget}")
check(c["predicted_time"] != c["model_time"], "--calibrate: prediction equals the uncalibrated cost model's")
# both from the thread CPU clock: the calibrated prediction of a plan is close to its kernels' time
ratio = c["predicted_time"] / c["measured_kernel_time"]
check(0.5 < ratio < 2, f"--calibrate: predicted {c['predicted_time']} vs kernels {c['measured_kernel_time']}")

t = run("plan", *plan_args, "--calibrate").stdout
check("calibrated" in t and "nodes on the CPU backend" in t, f"no calibration line:\n{t}")
check("error          prediction" in t and "uncalibrated cost model" in t, f"no prediction errors:\n{t}")

b = run("bench", *common, "--memories", "80%", "--strategies", "none,optimal", "--steps", "1", "--calibrate").stdout
check("calibrated ms (err)" in b and "model ms (err)" in b, f"bench --calibrate: no prediction columns:\n{b}")
b = run("bench", *common, "--memories", "80%", "--strategies", "optimal", "--steps", "1").stdout
check("calibrated ms" not in b and "model ms (err)" in b, f"bench: columns:\n{b}")

run("train", *common, "--steps", "1", "--calibrate", "-o", "t.onnx", code=2)
p = run("train", *common, "--steps", "2", "--memory", str(budget), "--calibrate", "-o", "t.onnx")
check("calibrated" in p.stderr, f"train --calibrate: no calibration line:\n{p.stderr}")

for cmd in ("plan", "train", "bench"):
    h = run(cmd, "--help").stdout
    check("--calibrate" in h, f"{cmd} --help does not document --calibrate")

print("ok" if not failures else f"{failures} failures")
sys.exit(1 if failures else 0)
