#!/usr/bin/env python3
"""Plans under memory budgets (registered by tests/plan_invariant.cmake and tests/plan_cli.cmake).

  plan_invariant.py SCORCH_RUN invariant MODEL [OPTION ...]
      MODEL is resnet, dranet, gpt or densenet (small sizes below); OPTIONs (such as --precision
      bf16) go to every plan and train command. The reference is `train --strategy
      none` (the store-everything plan run by the plan executor); it must also equal the plain
      executor's weights (train without plan options). Then every strategy (none, sqrt, dc, dc with 2
      slots, optimal, evict, auto) at budgets of the fixed bytes plus 100%, 60% and 35% of the none plan's
      activation memory (peak - fixed), and three streaming ones (none + offload weights, dc + both,
      auto + auto) at 100%, 60% and 35% of the none peak: when `plan` says the budget
      is infeasible it must exit 1 and name a smallest budget, and that budget must then plan; when
      feasible, `train --steps 3` must write initializers byte-identical to the reference and report a
      measured arena peak equal to the planned one, and the plan must fit the budget.
  plan_invariant.py SCORCH_RUN cli
      `plan --json` numbers are consistent (none has no recompute, flops = none's + recompute, the peak
      splits into fixed + activations, fits the budget); `--trace` is JSON with traceEvents (compute
      events, a device memory counter whose maximum is the live peak); `--svg` is well-formed SVG;
      sizes parse (256MiB, 1.5GiB, 500MB, bytes); bad sizes and strategies are usage errors (exit 2);
      a budget below the fixed bytes fails with exit 1 naming the smallest budget; bench runs and
      writes a CSV, markdown table and SVG.
  plan_invariant.py SCORCH_RUN threads MODEL
      At sizes where the kernels cut their work (convolution dW items, sgemm tiles), `train --steps 3`
      writes byte-identical weights with --threads 1, 2 and 3 and without --threads (each step then
      runs on all cores or one thread, whichever is faster; the first steps try both).
Fails through the exit code.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import onnx

SCORCH = None
OPTIONS = []  # invariant's extra options (--precision bf16)
THREADS = ["--threads", "1"]  # one thread: deterministic kernels and no OpenMP spinning under ctest -j
GEN = {
    "resnet": ["resnet", "--depth", "18", "--width", "8", "--image", "32", "--classes", "10"],
    "dranet": ["dranet", "--depth", "50", "--width", "8", "--image", "32", "--classes", "4", "--gamma", "0.5"],
    "gpt": ["gpt", "--layers", "2", "--heads", "2", "--dim", "64", "--vocab", "64", "--seq", "16"],
    "densenet": ["densenet", "--blocks", "4", "--layers-per-block", "3", "--growth", "8", "--image", "16"],
}
DIMS = {"resnet": ["--batch", "4"], "dranet": ["--batch", "2"], "gpt": ["--batch", "4", "--seq", "16"],
        "densenet": ["--batch", "4"]}
STRATEGIES = [["none"], ["sqrt"], ["dc"], ["dc", "--slots", "2"], ["optimal"], ["evict"], ["auto"],
              ["none", "--offload", "weights"], ["dc", "--offload", "both"], ["auto", "--offload", "auto"]]
# budgets: fixed bytes + this share of the none plan's activation memory (peak - fixed), since the
# fixed region (parameters, momentum, inputs) cannot shrink without offload; with --offload, this
# share of the whole none peak
FRACTIONS = [1.0, 0.6, 0.35]
# `threads`: sizes at which oneDNN's own threading gave other bits on 1 and 2 threads (ResNet-18's
# downsample dW, a GPT MLP's dX through sgemm; DenseNet's 1x1 and 3x3 dW)
THREAD_GEN = {
    "resnet": (["resnet", "--depth", "18", "--image", "64", "--classes", "10"], ["--batch", "4"]),
    "gpt": (["gpt", "--layers", "2", "--heads", "4", "--dim", "256", "--vocab", "1000", "--seq", "128"],
            ["--batch", "4", "--seq", "128"]),
    "densenet": (["densenet"], ["--batch", "8"]),
}


ERRORS = []


class Failed(Exception):
    pass


def fail(msg):
    """Raises; main() prints the message and exits 1. The invariant loop catches it per (strategy,
    budget) point, so every point runs and the test fails at the end naming all failed points."""
    raise Failed(msg)


def run(args):
    return subprocess.run([SCORCH] + args, capture_output=True, text=True)


def must(args):
    p = run(args)
    if p.returncode != 0:
        fail("scorch-run %s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def gen(model):
    path = model + ".onnx"
    must(["gen"] + GEN[model] + ["-o", path])
    return path


def plan_json(path, model, extra):
    p = run(["plan", path] + DIMS[model] + extra + ["--json"])
    if p.returncode == 0:
        return json.loads(p.stdout), p
    return None, p


def initializers(path):
    m = onnx.load(path)
    return {t.name: t.raw_data if t.raw_data else onnx.numpy_helper.to_array(t).tobytes() for t in m.graph.initializer}


def same_weights(ref, got, what):
    if ref.keys() != got.keys():
        fail("%s: initializer names differ" % what)
    bad = [k for k in ref if ref[k] != got[k]]
    if bad:
        fail("%s: %d initializers differ from the none plan's, first '%s'" % (what, len(bad), bad[0]))


def train(path, model, extra, out):
    p = must(["train", path] + DIMS[model] + THREADS + ["--steps", "3", "-o", out] + extra)
    return p.stdout + p.stderr


PEAK_RE = re.compile(r"peak planned (\d+) measured (\d+)")
HOST_RE = re.compile(r"host copies: planned (\d+) measured (\d+)")
SMALLEST_RE = re.compile(r"(?:smallest|minimum|needs)[^0-9]*?(\d+) bytes")


def check_infeasible(path, model, extra, p, what):
    if p.returncode != 1:
        fail("%s: an infeasible plan must exit 1, got %d:\n%s" % (what, p.returncode, p.stderr))
    m = SMALLEST_RE.search(p.stderr)
    if not m:
        fail("%s: the message does not name the smallest budget:\n%s" % (what, p.stderr))
    smallest = int(m.group(1))
    fixed_extra = [a for i, a in enumerate(extra) if a != "--memory" and (i == 0 or extra[i - 1] != "--memory")]
    js, p2 = plan_json(path, model, fixed_extra + ["--memory", str(smallest)])
    if js is None:
        fail("%s: the smallest budget named (%d) does not plan either:\n%s" % (what, smallest, p2.stderr))
    return smallest


def invariant(model):
    path = gen(model)
    none, p = plan_json(path, model, ["--strategy", "none"])
    if none is None:
        fail("plan --strategy none failed:\n" + p.stderr)
    peak0, fixed = none["planned_peak"], none["fixed_bytes"]
    if "--param-block" in OPTIONS and none["row_blocks"] < 2:
        fail("--param-block %s: the plan has %d row blocks; the tied table was not split" %
             (OPTIONS[OPTIONS.index("--param-block") + 1], none["row_blocks"]))
    log = train(path, model, ["--strategy", "none"], "ref.onnx")
    ref = initializers("ref.onnx")
    m = PEAK_RE.search(log)
    if not m or int(m.group(1)) != int(m.group(2)) or int(m.group(1)) != peak0:
        fail("none plan: planned/measured peak line missing or unequal (plan says %d):\n%s" % (peak0, log))
    train(path, model, [], "plain.onnx")
    same_weights(ref, initializers("plain.onnx"), "%s: plain executor vs none plan" % model)
    checked = infeasible = 0
    for strat in STRATEGIES:
        for frac in FRACTIONS:
            if "--offload" in strat:
                budget = int(peak0 * frac)
                what = "%s %s at %d%% of the none peak (%d bytes)" % (model, " ".join(strat), int(frac * 100), budget)
            else:
                budget = fixed + int((peak0 - fixed) * frac)
                what = "%s %s at fixed + %d%% of activations (%d bytes)" % (model, " ".join(strat), int(frac * 100),
                                                                          budget)
            extra = ["--strategy"] + strat + ["--memory", str(budget)]
            try:
                r = check_point(path, model, extra, what, budget, peak0, ref)
            except Failed as e:
                print("FAIL: " + str(e), file=sys.stderr)
                ERRORS.append(str(e))
                continue
            checked += r == "ok"
            infeasible += r == "infeasible"
    host_checked = host_updates(path, model, peak0)
    if ERRORS:
        fail("%s: %d of %d points failed" % (model, len(ERRORS), len(STRATEGIES) * len(FRACTIONS) + HOST_POINTS))
    if host_checked < HOST_POINTS:
        fail("%s: only %d of %d host-update points ran" % (model, host_checked, HOST_POINTS))
    # bf16 (an OPTION run) keeps a bf16 copy of each weight next to the f32 one and its gradient in
    # both types, which on these weight-dominated small models leaves fewer budgets feasible
    least = len(STRATEGIES) + (0 if OPTIONS else 3)
    if checked < least:
        fail("%s: only %d feasible (strategy, budget) pairs; the test would prove little" % (model, checked))
    print("%s: %d plans bit-identical to the none plan, %d infeasible budgets named their minimum" %
          (model, checked, infeasible))


# Optimizer updates on the host (--optimizer-on host): per optimizer, the weights of three streaming
# plans with host updates (one of them mixed: parameters whose group with their state is at most
# 1 KiB, the normalisation scales and biases here, stay resident and update on the device) and one
# with device updates must equal that optimizer's none plan, and so must a host-update run stopped
# after step 2 (its state saved) and resumed for step 3.
# (plan, share of the none peak): with clipping every gradient waits for the norm, which device
# updates hold on the device to the end, so their point gets the whole none peak.
HOST_PLANS = [(["dc", "--offload", "weights", "--optimizer-on", "host"], 0.6),
              (["auto", "--offload", "both", "--optimizer-on", "host"], 0.6),
              (["dc", "--offload", "weights", "--optimizer-on", "host", "--resident", "1KiB"], 0.6),
              (["auto", "--offload", "weights", "--optimizer-on", "device"], 1.0)]
HOST_OPTIMIZERS = [["--optimizer", "sgd"], ["--optimizer", "adamw", "--clip", "0.5"]]
HOST_POINTS = len(HOST_OPTIMIZERS) * (len(HOST_PLANS) + 1)


def host_updates(path, model, peak0):
    done = 0
    for opt in HOST_OPTIMIZERS:
        train(path, model, ["--strategy", "none"] + opt, "ref_%s.onnx" % opt[1])
        ref = initializers("ref_%s.onnx" % opt[1])
        for strat, frac in HOST_PLANS:
            budget = int(peak0 * frac)
            extra = opt + ["--strategy"] + strat + ["--memory", str(budget)]
            what = "%s %s at %d%% of the none peak" % (model, " ".join(opt + strat), int(frac * 100))
            try:
                js, p = plan_json(path, model, extra)
                if js is None:
                    fail("%s: does not plan:\n%s" % (what, p.stderr))
                # host updates unless the planner kept every parameter resident (tiny models)
                places = list((js["param_updates"] or {}).values())
                all_resident = places and places.count("device") == len(places)
                want = "host" if "host" in strat and not all_resident else "device"
                if js["update_on"] != want or (want == "host") != (js["host_updates"] > 0):
                    fail("%s: plan says update_on %s with %d host updates" % (what, js["update_on"], js["host_updates"]))
                if places.count("host") != js["host_updates"] or places.count("device") != js["resident_params"]:
                    fail("%s: param_updates %s disagree with %d host updates and %d resident parameters" %
                         (what, js["param_updates"], js["host_updates"], js["resident_params"]))
                if "--resident" in strat and js["resident_params"] == 0:
                    fail("%s: no parameter resident" % what)
                if check_point(path, model, extra, what, budget, peak0, ref) == "ok":
                    done += 1
            except Failed as e:
                print("FAIL: " + str(e), file=sys.stderr)
                ERRORS.append(str(e))
        extra = opt + ["--strategy"] + HOST_PLANS[0][0] + ["--memory", str(int(peak0 * HOST_PLANS[0][1]))]
        what = "%s %s: 2 steps, saved, resumed for step 3" % (model, " ".join(extra))
        try:
            shutil.rmtree("st", ignore_errors=True)
            must(["train", path] + DIMS[model] + THREADS + ["--steps", "2", "-o", "half.onnx", "--save-every", "2",
                                                           "--state", "st"] + extra)
            must(["train", path] + DIMS[model] + THREADS + ["--steps", "3", "-o", "resumed.onnx", "--resume", "st"]
                 + extra)
            same_weights(ref, initializers("resumed.onnx"), what)
            print("ok %s: weights equal the uninterrupted none plan's" % what)
            done += 1
        except Failed as e:
            print("FAIL: " + str(e), file=sys.stderr)
            ERRORS.append(str(e))
    return done


def check_point(path, model, extra, what, budget, peak0, ref):
    js, p = plan_json(path, model, extra)
    if js is None:
        smallest = check_infeasible(path, model, extra, p, what)
        print("ok %s: infeasible, smallest budget named %d" % (what, smallest))
        return "infeasible"
    if js["planned_peak"] > budget:
        fail("%s: planned peak %d over the budget" % (what, js["planned_peak"]))
    log = train(path, model, extra, "out.onnx")
    m = PEAK_RE.search(log)
    if not m:
        fail("%s: train printed no planned/measured peak:\n%s" % (what, log))
    planned, measured = int(m.group(1)), int(m.group(2))
    if planned != js["planned_peak"] or measured != planned:
        fail("%s: planned %d (plan command: %d), measured %d" % (what, planned, js["planned_peak"], measured))
    # host copies of moved values: the CPU backend runs host updates inline, so exactly the plan's
    h = HOST_RE.search(log)
    if js["host_bytes"] > 0 and (not h or int(h.group(1)) != js["host_bytes"] or int(h.group(2)) != js["host_bytes"]):
        fail("%s: host copies planned %d (plan command), train says %s" % (what, js["host_bytes"], h.group(0) if h else "nothing"))
    same_weights(ref, initializers("out.onnx"), what)
    print("ok %s: %s, peak %d (activations %.0f%% of none's), recompute %.3g flops" %
          (what, js["strategy"], planned, 100.0 * (planned - js["fixed_bytes"]) / (peak0 - js["fixed_bytes"]),
           js["recompute_flops"]))
    return "ok"


def cli():
    model = "resnet"
    path = gen(model)
    none, p = plan_json(path, model, [])
    if none is None:
        fail("plan without options failed:\n" + p.stderr)
    if none["strategy"] != "none" or none["recompute_flops"] != 0 or none["recompute_runs"] != 0:
        fail("plan without --memory must be the none plan with no recompute: %s" % none)
    peak0 = none["planned_peak"]
    if none["none_peak"] != peak0:
        fail("none plan: none_peak %d != planned_peak %d" % (none["none_peak"], peak0))
    budget = none["fixed_bytes"] + int(0.6 * (peak0 - none["fixed_bytes"]))
    js, p = plan_json(path, model, ["--memory", str(budget), "--strategy", "dc"])
    if js is None:
        fail("dc at fixed + 60% of the activations must be feasible on resnet18-small:\n" + p.stderr)
    checks = [
        (js["planned_peak"] <= budget, "planned peak within the budget"),
        (js["activation_peak"] == js["planned_peak"] - js["fixed_bytes"], "peak = fixed + activations"),
        (js["live_peak"] <= js["planned_peak"], "live peak <= arena"),
        (js["param_bytes"] + js["state_bytes"] <= js["fixed_bytes"], "params + state inside the fixed region"),
        (js["fixed_bytes"] == none["fixed_bytes"], "fixed bytes independent of the strategy"),
        (js["recompute_flops"] > 0 and js["recompute_runs"] > 0, "dc under a budget recomputes"),
        (abs(js["flops"] - js["recompute_flops"] - none["flops"]) <= 1e-9 * none["flops"], "flops = none + recompute"),
        (0 < js["recompute_time_share"] < 1, "recompute time share in (0, 1)"),
        (js["compute_time"] > none["compute_time"], "recompute costs time"),
        (js["predicted_time"] > 0 and abs(js["timeline_time"] - js["predicted_time"]) <= 1e-9 * js["predicted_time"],
         "the report's timeline reproduces the plan's predicted time"),
        (js["none_peak"] == peak0, "none_peak reported"),
        (js["bytes_h2d"] == 0 and js["bytes_d2h"] == 0, "no transfers without offload"),
    ]
    for ok, what in checks:
        if not ok:
            fail("plan --json: %s: %s" % (what, js))
    # sizes
    for text, val in [("1.5GiB", int(1.5 * 2**30)), ("256MiB", 256 * 2**20), ("500MB", 500 * 10**6), ("123456789", 123456789)]:
        js2, p = plan_json(path, model, ["--memory", text, "--strategy", "none"])
        if js2 is None or js2["budget"] != val:
            fail("--memory %s should be %d bytes: %s %s" % (text, val, js2, p.stderr))
    for bad in [["--memory", "12XB"], ["--memory", "-5"], ["--strategy", "magic"], ["--offload", "sometimes"]]:
        p = run(["plan", path, "--batch", "4"] + bad)
        if p.returncode != 2:
            fail("plan %s: expected a usage error (2), got %d" % (" ".join(bad), p.returncode))
    # below the fixed region: nothing fits
    extra = ["--memory", str(none["fixed_bytes"] // 2), "--strategy", "auto"]
    js3, p = plan_json(path, model, extra)
    if js3 is not None:
        fail("a budget of half the fixed bytes must be infeasible")
    smallest = check_infeasible(path, model, extra, p, "half the fixed bytes")
    p = run(["train", path] + DIMS[model] + ["--steps", "1", "-o", "never.onnx"] + extra)
    if p.returncode != 1 or not SMALLEST_RE.search(p.stderr) or os.path.exists("never.onnx"):
        fail("train with an infeasible budget: exit %d, stderr %s" % (p.returncode, p.stderr))
    # a plan predicted over 2x the store-everything step names the budget at which it is within 25%,
    # and planning at that budget agrees; a plan within 2x searches nothing
    slow, p = plan_json(path, model, ["--memory", str(smallest), "--strategy", "optimal"])
    if slow is None or slow["none_time"] <= 0:
        fail("optimal at the smallest budget: %s" % p.stderr)
    ratio = slow["predicted_time"] / slow["none_time"]
    if ratio > 2:
        b = slow["budget_cheap"]
        if not smallest < b < peak0:
            fail("a plan %.2fx the store-all step named budget %d (smallest %d, store-all %d)" % (ratio, b, smallest, peak0))
        at, p = plan_json(path, model, ["--memory", str(b), "--strategy", "optimal"])
        if at is None or at["predicted_time"] > 1.25 * at["none_time"] or at["predicted_time"] != slow["time_cheap"]:
            fail("at the named budget %d the plan is not within 1.25x as reported: %s" % (b, at))
        text = must(["plan", path] + DIMS[model] + ["--memory", str(smallest), "--strategy", "optimal"]).stdout
        if "warning" not in text or "--memory %d" % b not in text:
            fail("the text summary does not warn with the budget:\n" + text)
    elif slow["budget_cheap"] != -1:
        fail("a plan %.2fx the store-all step searched for a cheaper budget: %s" % (ratio, slow))
    print("optimal at the smallest budget %d: %.2fx the store-all step, within 1.25x at %d" %
          (smallest, ratio, slow["budget_cheap"]))
    # trace and svg
    must(["plan", path] + DIMS[model] + ["--memory", str(budget), "--strategy", "dc", "--trace", "plan.json",
                                       "--svg", "memory.svg"])
    with open("plan.json") as f:
        tr = json.load(f)
    ev = tr["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    compute = [e for e in ev if e.get("ph") == "X" and names.get(e.get("tid")) == "compute"]
    if not compute or any(e["dur"] < 0 or e["ts"] < 0 for e in compute):
        fail("trace: no compute events or negative times")
    if not any(e.get("cat") == "recompute" for e in compute):
        fail("trace: a dc plan under a budget shows no recompute events")
    counters = [e for e in ev if e.get("ph") == "C" and e.get("name") == "device memory"]
    top = max(sum(e["args"].values()) for e in counters) if counters else -1
    if top != js["live_peak"]:
        fail("trace: device memory counter peaks at %d, plan --json says live peak %d" % (top, js["live_peak"]))
    ends = [e["ts"] + e["dur"] for e in compute]
    if abs(max(ends) * 1e-6 - js["compute_time"]) > 1e-6 * max(1.0, js["compute_time"]) + 1e-9:
        fail("trace: compute track ends at %g s, compute time %g s" % (max(ends) * 1e-6, js["compute_time"]))
    # streaming: transfers on the h2d/d2h tracks, the same predicted time as the plan's
    extra = ["--memory", str(int(peak0 * 0.6)), "--strategy", "none", "--offload", "weights"]
    js4, p = plan_json(path, model, extra)
    if js4 is None:
        fail("none + offload weights at 60% of the peak must plan:\n" + p.stderr)
    if not (js4["bytes_h2d"] > 0 and js4["bytes_d2h"] > 0 and js4["offload"] == "weights"):
        fail("offload weights moves no bytes: %s" % js4)
    if abs(js4["timeline_time"] - js4["predicted_time"]) > 1e-9 * js4["predicted_time"]:
        fail("offload: the report's timeline %g s differs from the plan's prediction %g s" %
             (js4["timeline_time"], js4["predicted_time"]))
    must(["plan", path] + DIMS[model] + extra + ["--trace", "offload.json"])
    with open("offload.json") as f:
        ev = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for track in ["h2d", "d2h"]:
        if not any(e.get("ph") == "X" and names.get(e.get("tid")) == track for e in ev):
            fail("offload trace: no events on the %s track" % track)
    root = ET.parse("memory.svg").getroot()
    if root.tag != "{http://www.w3.org/2000/svg}svg":
        fail("svg root is %s" % root.tag)
    ns = {"s": "http://www.w3.org/2000/svg"}
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for word in ["dc", "activations", "gradients", "fixed", path]:
        if word not in texts:
            fail("svg: no text '%s'" % word)
    if len(root.findall(".//s:path", ns)) < 3:
        fail("svg: expected one filled area per value kind")
    # resume and NaN detection through a plan: 2 steps without a plan, saved, then resumed under dc
    # must equal 4 straight dc steps; --lr 1e30 must stop naming a tensor and write nothing
    plan_opts = ["--strategy", "dc", "--memory", str(peak0)]
    base = ["train", path] + DIMS[model] + THREADS
    must(base + ["--steps", "4", "-o", "full.onnx"] + plan_opts)
    must(base + ["--steps", "2", "--state", "st", "--save-every", "2", "-o", "half.onnx"])
    must(base + ["--steps", "4", "--resume", "st", "-o", "resumed.onnx"] + plan_opts)
    same_weights(initializers("full.onnx"), initializers("resumed.onnx"), "resume under a dc plan")
    # without the rollback copy: the state is checked, then read into the live values
    must(base + ["--steps", "4", "--resume", "st", "--rollback", "off", "-o", "resumed_nr.onnx"] + plan_opts)
    same_weights(initializers("full.onnx"), initializers("resumed_nr.onnx"), "resume under a dc plan, rollback off")
    # a modelled link (--link-bandwidth: every copy paced on its direction's copy thread) moves the
    # same bytes at another pace: the same weights
    link_opts = ["--strategy", "dc", "--memory", str(peak0), "--offload", "both", "--link-bandwidth", "2GB"]
    must(base + ["--steps", "4", "-o", "link.onnx"] + link_opts)
    same_weights(initializers("full.onnx"), initializers("link.onnx"), "dc with offload over a 2 GB/s modelled link")
    p = run(base + ["--steps", "3", "--lr", "1e30", "-o", "nan.onnx"] + plan_opts)
    if p.returncode != 1 or "non-finite" not in p.stderr or os.path.exists("nan.onnx"):
        fail("NaN under a plan: exit %d, stderr %s" % (p.returncode, p.stderr))
    p = run(base + ["--steps", "3", "--lr", "1e30", "--rollback", "off", "-o", "nan.onnx"] + plan_opts)
    if p.returncode != 1 or "rollback is off" not in p.stderr or os.path.exists("nan.onnx"):
        fail("NaN under a plan without rollback: exit %d, stderr %s" % (p.returncode, p.stderr))
    # bench
    p = must(["bench", path, "--batch", "4", "--memories", "100%,50%", "--strategies", "none,dc", "--steps", "1",
              "--csv", "bench.csv", "--svg", "bench.svg"] + THREADS)
    if "| strategy |" not in p.stdout:
        fail("bench: no markdown table:\n" + p.stdout)
    with open("bench.csv") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 5:
        fail("bench.csv: expected 5 rows (baseline + 2x2), got %d" % len(rows))
    for r in rows:
        if r["feasible"] == "1" and int(r["measured_peak"]) != int(r["planned_peak"]):
            fail("bench: measured peak differs from planned: %s" % r)
    ET.parse("bench.svg")
    print("plan cli ok: dc under %d bytes peaks at %d of %d bytes" % (budget, js["planned_peak"], peak0))


THREADS_RE = re.compile(r"threads: (\d+), or fewer for (\d+) of (\d+) steps")


def threads(model):
    gen_args, dims = THREAD_GEN[model]
    path = model + "_threads.onnx"
    must(["gen"] + gen_args + ["-o", path])
    outs = {}
    for label, extra in [("1", ["--threads", "1"]), ("2", ["--threads", "2"]), ("3", ["--threads", "3"]),
                         ("default", [])]:
        out = "%s_t%s.onnx" % (model, label)
        p = must(["train", path] + dims + extra + ["--steps", "3", "-o", out])
        m = THREADS_RE.search(p.stdout)
        if label == "default" and len(os.sched_getaffinity(0)) > 1 and not (
                m and int(m.group(1)) == len(os.sched_getaffinity(0)) and int(m.group(3)) == 3):
            fail("train without --threads on %d cores does not report its choice between them and 1 thread for "
                 "its 3 steps:\n%s" % (len(os.sched_getaffinity(0)), p.stdout))
        outs[label] = initializers(out)
    for label in ("2", "3", "default"):
        bad = [k for k in outs["1"] if outs["1"][k] != outs[label][k]]
        if bad:
            fail("%s: %d initializers differ between --threads 1 and %s, first '%s'" % (model, len(bad), label, bad[0]))
    print("%s: the same weights on 1, 2, 3 threads and the adaptive count" % model)


def main():
    global SCORCH
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    SCORCH = sys.argv[1]
    try:
        if sys.argv[2] == "invariant":
            if sys.argv[4:]:  # e.g. --precision bf16: every plan and training run of the family with it
                DIMS[sys.argv[3]] = DIMS[sys.argv[3]] + sys.argv[4:]
                OPTIONS.extend(sys.argv[4:])
            invariant(sys.argv[3])
        elif sys.argv[2] == "threads":
            threads(sys.argv[3])
        elif sys.argv[2] == "cli":
            cli()
        else:
            fail(__doc__)
    except Failed as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
