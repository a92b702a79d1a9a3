#!/usr/bin/env python3
"""End-to-end checks of `scorch-run train` (registered by tests/train_cli.cmake).

  train_cli_check.py SCORCH_RUN roundtrip resnet|gpt|dranet
      generate a small model, train it (--log, --dump-grads), check that the loss went down, that
      the weights changed, that the gradient dump is complete and its loss.npy is the logged first
      loss, and that onnxruntime runs the trained model and matches `scorch-run run` on it (1e-4).
  train_cli_check.py SCORCH_RUN nan
      --lr 1e30 must stop with exit 1 and a message naming the step and a tensor; no model is
      written and the state saved before the failure is left as it was.
  train_cli_check.py SCORCH_RUN fp16
      dynamic loss scaling (train/loss_scale.c) against GradScaler's rules: at a scale that
      overflows, updates are skipped (weights unchanged) while the scale halves; the scale doubles
      after --loss-scale-interval good steps; AdamW's first real update moves each weight by lr
      (a skipped step does not count as an optimizer step); save and resume keep the scaler; an
      fp16 overflow in the forward pass, or without the rollback copy, stops with the step and the
      tensor and writes nothing.
  train_cli_check.py SCORCH_RUN save_bf16 resnet|gpt
      --save-precision bf16: the file passes onnx.checker, each f32 parameter is a bf16 initializer
      "<name>.bf16" whose bits are the round-to-nearest-even of the fp32 run's weight (computed here),
      behind a Cast "<name>.to_float"; onnxruntime gives the same outputs as the fp32 file with its
      weights rounded by numpy; the file is at most 0.6x the fp32 one; training it again is refused
      with a message naming the parameter.
  train_cli_check.py SCORCH_RUN export_inputs
      a language model laid out as exporters write it (ids reshaped before the embedding Gather, an
      attention_mask input): synthetic data recognises it (Markov-chain tokens, mask all ones) and
      the loss falls; --tokens trains it; --data NAME=x.npy feeds inputs by name, a left-out mask is
      all ones (the same weights as an explicit all-ones mask file), a mask with zeros changes the
      result; bad names and mask values are errors naming them.
  train_cli_check.py SCORCH_RUN profile
      --profile prints the per-op table over the steps after the first: per step, Conv and ConvGrad
      run once per Conv of the model and SGDUpdate once per trained tensor (so the first step is not
      counted and the totals are divided by the right number); the kernels' total per step is at
      most the logged step time; with one step there is nothing to time, and it says so.
  train_cli_check.py SCORCH_RUN kill [ITERATIONS]
      start a run saving every step, kill -9 it at random moments (while saving, thanks to
      SCORCH_TEST_SAVE_SLEEP_US), resume each time from the state folder (which must always load),
      and check that the final weights are bit-identical to an uninterrupted run.
Fails through the exit code.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SCORCH = None
GEN = {
    "resnet": ["resnet", "--depth", "18", "--width", "8", "--image", "32", "--classes", "10"],
    "gpt": ["gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--vocab", "64", "--seq", "16"],
    "dranet": ["dranet", "--depth", "50", "--width", "8", "--image", "32", "--classes", "4", "--gamma", "0.5"],
}
TRAIN = {
    "resnet": ["--batch", "16", "--steps", "20", "--lr", "0.02"],
    "gpt": ["--batch", "8", "--seq", "16", "--steps", "20", "--optimizer", "adamw", "--lr", "3e-3",
            "--schedule", "cosine", "--warmup", "2", "--clip", "1.0"],
    # one fixed batch (written by roundtrip), every step: with synthetic data each step draws a new
    # batch of 2 images and DRANet's per-step loss swings by +-1 whatever the weights, so "the loss
    # went down" over 8 steps was decided by rounding (a change in the optimizer's last bits flipped it)
    "dranet": ["--batch", "2", "--steps", "8", "--lr", "0.01", "--data", "x.npy", "--labels", "y.npy"],
}
RUN_DIMS = {"resnet": ["--batch", "2"], "gpt": ["--batch", "2", "--seq", "16"], "dranet": ["--batch", "2"]}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(args, **kw):
    p = subprocess.run([SCORCH] + args, capture_output=True, text=True, **kw)
    return p


def must(args, **kw):
    p = run(args, **kw)
    if p.returncode != 0:
        fail("scorch-run %s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def weights(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


LOG_HEADER = "step,loss,lr,samples_per_s,elapsed_s,precision,loss_scale,skipped"


def read_log(path, precision="fp32"):
    """Rows of floats: step, loss, lr, samples_per_s, elapsed_s, loss_scale, skipped."""
    rows = open(path).read().strip().splitlines()
    if rows[0] != LOG_HEADER:
        fail("log header is %r" % rows[0])
    if any(r.split(",")[5] != precision for r in rows[1:]):
        fail("log rows do not all say precision %s" % precision)
    return [[float(v) for i, v in enumerate(r.split(",")) if i != 5] for r in rows[1:]]


def roundtrip(kind):
    must(["gen"] + GEN[kind] + ["-o", "m.onnx"])
    if kind == "dranet":
        r = np.random.default_rng(0)
        np.save("x.npy", r.standard_normal((2, 3, 32, 32)).astype(np.float32))
        np.save("y.npy", r.integers(0, 4, (2, 32, 32)).astype(np.int64))
    p = must(["train", "m.onnx", "-o", "t.onnx", "--log", "log.csv", "--dump-grads", "grads"] + TRAIN[kind])
    print(p.stdout + p.stderr)
    log = read_log("log.csv")
    steps = int(TRAIN[kind][TRAIN[kind].index("--steps") + 1])
    if [int(r[0]) for r in log] != list(range(1, steps + 1)):
        fail("log steps are %s" % [r[0] for r in log])
    losses = np.array([r[1] for r in log])
    k = 3
    if not np.all(np.isfinite(losses)) or losses[-k:].mean() >= losses[:k].mean():
        fail("loss did not go down: %s" % losses)
    if "loss %.4f -> %.4f" % (losses[0], losses[-1]) not in p.stdout:
        fail("summary line missing or wrong: %s" % p.stdout)
    # gradients: one file per trainable parameter, and the loss of step 1
    w0, w1 = weights("m.onnx"), weights("t.onnx")
    changed = [n for n in w0 if not np.array_equal(w0[n], w1[n])]
    if not changed:
        fail("training changed no weight")
    files = set(os.listdir("grads"))
    loss0 = np.load("grads/loss.npy")
    if loss0.shape != () or abs(float(loss0) - losses[0]) > 1e-6 * max(1, abs(losses[0])):
        fail("grads/loss.npy %s differs from the logged first loss %g" % (loss0, losses[0]))
    safe = lambda n: "".join(c if c.isalnum() or c in "._-" else "_" for c in n)
    for n in changed:
        if w0[n].dtype != np.float32 or n.endswith("running_mean") or n.endswith("running_var"):
            continue
        if safe(n) + ".npy" not in files and ("mean" not in n and "var" not in n):
            fail("no gradient file for trained parameter %s" % n)
        if safe(n) + ".npy" in files:
            g = np.load("grads/" + safe(n) + ".npy")
            if g.shape != w0[n].shape or not np.all(np.isfinite(g)):
                fail("gradient of %s has shape %s (want %s) or is not finite" % (n, g.shape, w0[n].shape))
    # the trained model in onnxruntime vs scorch-run run
    m = onnx.load("t.onnx")
    sess = ort.InferenceSession("t.onnx", providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for inp in sess.get_inputs():
        if kind == "gpt":
            feeds[inp.name] = rng.integers(0, 64, size=(2, 16)).astype(np.int64)
        else:
            shape = [2] + [d for d in inp.shape[1:]]
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    args = ["run", "t.onnx", "--output-dir", "out"] + RUN_DIMS[kind]
    for name, x in feeds.items():
        np.save(name + ".npy", x)
        args += ["--input", "%s=%s.npy" % (name, name)]
    must(args)
    ref = sess.run(None, feeds)
    for o, r in zip(m.graph.output, ref):
        ours = np.load(os.path.join("out", safe(o.name) + ".npy"))
        # 1e-4 relative to the output's scale: a few steps leave BatchNormalization's running
        # statistics far from the batch statistics, so eval-mode outputs can be large
        scale = max(1.0, float(np.abs(r).max()))
        if ours.shape != r.shape or not np.allclose(ours, r, rtol=1e-4, atol=1e-4 * scale):
            fail("output %s: scorch-run run and onnxruntime differ on the trained model (max |d| %g)"
                 % (o.name, np.abs(ours - r).max() if ours.shape == r.shape else -1))
    print("roundtrip %s ok: loss %.4f -> %.4f, %d weights changed" % (kind, losses[0], losses[-1], len(changed)))


def state_step(path):
    with open(path, "rb") as f:
        head = f.read(24)
    return int.from_bytes(head[16:24], "little")


def nan():
    must(["gen"] + GEN["resnet"] + ["-o", "m.onnx"])
    # one good checkpoint first, then a run that diverges
    must(["train", "m.onnx", "-o", "good.onnx", "--batch", "4", "--steps", "2", "--save-every", "1", "--state", "st"])
    before = open("st/state.bin", "rb").read()
    if os.path.exists("bad.onnx"):
        os.remove("bad.onnx")
    p = run(["train", "m.onnx", "-o", "bad.onnx", "--batch", "4", "--steps", "10", "--lr", "1e30",
             "--resume", "st"])
    if p.returncode != 1:
        fail("--lr 1e30 exited %d:\n%s%s" % (p.returncode, p.stdout, p.stderr))
    err = p.stderr
    if "step " not in err or ("appeared in '" not in err and "already held" not in err):
        fail("the NaN message names no step or tensor:\n" + err)
    print("nan message: " + err.strip().splitlines()[-1])
    if not re.search(r"step \d+: ", err):
        fail("the message does not name the step:\n" + err)
    if os.path.exists("bad.onnx"):
        fail("a diverged run wrote its model")
    if open("st/state.bin", "rb").read() != before:
        fail("the diverged run overwrote the saved state")
    if state_step("st/state.bin") != 2:
        fail("state step is %d, want 2" % state_step("st/state.bin"))
    # the state still resumes
    must(["train", "m.onnx", "-o", "resumed.onnx", "--batch", "4", "--steps", "4", "--resume", "st"])
    print("nan ok")


FP16_ARGS = ["--batch", "4", "--seq", "16", "--precision", "fp16"]
HUGE_SCALE = str(2.0 ** 40)  # 2^40 times any gradient above 6e-8 overflows fp16 (max 65504)


def scaler_rule_check(log, interval):
    """Each row's scale follows from the previous row by GradScaler.update: halve after a skipped step,
    double after `interval` good steps in a row, else keep."""
    good = 0
    for prev, row in zip(log, log[1:]):
        scale, skipped = prev[5], prev[6]
        good = 0 if skipped else good + 1
        want = scale / 2 if skipped else scale * 2 if good == interval else scale
        if good == interval:
            good = 0
        if row[5] != want:
            fail("step %d ran at loss scale %g; after step %d (scale %g, skipped %d) GradScaler's rule gives %g"
                 % (row[0], row[5], prev[0], scale, skipped, want))


def fp16():
    must(["gen"] + GEN["gpt"] + ["-o", "m.onnx"])
    w0 = weights("m.onnx")
    # 1. every step overflows: the updates are skipped and the weights come back unchanged
    p = must(["train", "m.onnx", "-o", "s.onnx", "--log", "s.csv", "--steps", "3", "--loss-scale", HUGE_SCALE] + FP16_ARGS)
    log = read_log("s.csv", "fp16")
    if [r[6] for r in log] != [1, 1, 1] or [r[5] for r in log] != [2.0 ** 40, 2.0 ** 39, 2.0 ** 38]:
        fail("at scale 2^40 the log's (scale, skipped) are %s" % [(r[5], r[6]) for r in log])
    if "update skipped" not in p.stderr:
        fail("no skipped-step line on stderr:\n" + p.stderr)
    w = weights("s.onnx")
    changed = [n for n in w0 if not np.array_equal(w0[n], w[n])]
    if changed:
        fail("three skipped steps changed %s" % changed[:5])
    # 2. the scale halves until the gradients fit, then doubles after each 3 good steps
    must(["train", "m.onnx", "-o", "g.onnx", "--log", "g.csv", "--steps", "40", "--loss-scale", HUGE_SCALE,
          "--loss-scale-interval", "3"] + FP16_ARGS)
    log = read_log("g.csv", "fp16")
    scaler_rule_check(log, 3)
    first_good = next((int(r[0]) for r in log if not r[6]), None)
    if first_good is None or not any(r[6] for r in log[first_good:]) or not any(r[5] > log[first_good - 1][5] for r in log):
        fail("expected skips, then good steps, a doubling and a later overflow: %s" % [(r[5], r[6]) for r in log])
    losses = np.array([r[1] for r in log[first_good - 1:]])
    if not np.all(np.isfinite(losses)) or losses[-3:].mean() >= losses[:3].mean():
        fail("fp16 loss did not go down after the scale settled: %s" % losses)
    # 3. AdamW after skipped steps: its first real update is step 1 of the optimizer, which moves every
    #    weight with a clear gradient by lr (m/sqrt(v) = sign(g)); were the skipped steps counted, step k's
    #    bias correction would give (0.1/(1-0.9^k)) / sqrt(0.001/(1-0.999^k)) lr, 0.74 lr at k = 2
    lr = 1e-3
    must(["train", "m.onnx", "-o", "a.onnx", "--log", "a.csv", "--steps", str(first_good), "--optimizer", "adamw",
          "--lr", str(lr), "--weight-decay", "0", "--loss-scale", HUGE_SCALE] + FP16_ARGS)
    log = read_log("a.csv", "fp16")
    if [r[6] for r in log] != [1] * (first_good - 1) + [0]:
        fail("AdamW run: skipped flags %s, expected %d skips then one update" % ([r[6] for r in log], first_good - 1))
    w = weights("a.onnx")
    moves = np.concatenate([np.abs(w[n].astype(np.float64) - w0[n]).ravel() for n in w0 if w0[n].dtype == np.float32])
    moves = moves[moves > 0]
    if abs(np.median(moves) / lr - 1) > 0.01:
        fail("AdamW's first update after %d skipped steps moved weights by a median %.4g, not lr %g: the skipped "
             "steps were counted as optimizer steps" % (first_good - 1, np.median(moves), lr))
    # 4. save and resume mid-run keep the scaler: the same scales, skips and bits as one run (constant lr,
    #    so a 15-step run resumed to 30 is the 30-step run)
    args = ["train", "m.onnx", "--loss-scale", HUGE_SCALE, "--loss-scale-interval", "3", "--optimizer", "adamw"] + FP16_ARGS
    must(args + ["--steps", "30", "-o", "r1.onnx", "--log", "r1.csv"])
    shutil.rmtree("st", ignore_errors=True)
    for f in ("r2.csv",):
        if os.path.exists(f):
            os.remove(f)
    must(args + ["--steps", "15", "-o", "r2.onnx", "--log", "r2.csv", "--state", "st"])
    must(args + ["--steps", "30", "-o", "r2.onnx", "--log", "r2.csv", "--resume", "st"])
    a, b = weights("r1.onnx"), weights("r2.onnx")
    if any(not np.array_equal(a[n], b[n]) for n in a):
        fail("fp16 resumed at step 15 differs from the uninterrupted run")
    l1, l2 = read_log("r1.csv", "fp16"), read_log("r2.csv", "fp16")
    if [(r[5], r[6]) for r in l1] != [(r[5], r[6]) for r in l2]:
        fail("resumed scales/skips %s differ from %s" % ([(r[5], r[6]) for r in l2], [(r[5], r[6]) for r in l1]))
    # 5. what the scaler cannot recover stops the run, naming the step and the tensor, writing nothing:
    #    an overflow in the forward pass (the loss is computed before scaling): weights of 1e5 do not fit
    #    fp16 (max 65504), and products of 3e4 weights with the batch exceed it; and an overflow with no
    #    rollback copy to undo it
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    for value, name in ((1e5, "w1e5.onnx"), (3e4, "w3e4.onnx")):
        big = numpy_helper.from_array(np.full((8, 4), value, np.float32), "W")
        g = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "big", [x], [y], [big])
        onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]), name)
    forward = ["--batch", "4", "--loss", "mse", "--precision", "fp16"]
    cases = (("w1e5.onnx", forward, ["cannot recover an overflow in the forward pass", "in 'W/to_f16'"]),
             ("w3e4.onnx", forward, ["cannot recover an overflow in the forward pass", "node 'mm' (MatMul)"]),
             ("m.onnx", FP16_ARGS + ["--loss-scale", HUGE_SCALE, "--rollback", "off"], ["--rollback on", "'"]))
    for model, extra, wants in cases:
        if os.path.exists("bad.onnx"):
            os.remove("bad.onnx")
        p = run(["train", model, "-o", "bad.onnx", "--steps", "3"] + extra)
        if p.returncode != 1 or not all(w in p.stderr for w in wants) or not re.search(r"step 1: ", p.stderr):
            fail("%s %s: exit %d, want 1 and a message naming step 1 with %s:\n%s"
                 % (model, " ".join(extra), p.returncode, wants, p.stderr))
        if os.path.exists("bad.onnx"):
            fail("a run stopped by an fp16 overflow wrote its model")
        print("fp16 stop: " + p.stderr.strip().splitlines()[-1])
    print("fp16 ok: %d skipped steps before the first update; AdamW median first move %.6g (lr %g)"
          % (first_good - 1, np.median(moves), lr))


def bf16_round(a):
    """float32 -> the bits of its nearest bf16 (ties to even), as uint16 (no NaNs here)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def save_bf16(kind):
    must(["gen"] + GEN[kind] + ["-o", "m.onnx"])
    args = ["train", "m.onnx"] + TRAIN[kind][:TRAIN[kind].index("--steps")] + ["--steps", "3"]
    must(args + ["-o", "t32.onnx"])
    must(args + ["-o", "t16.onnx", "--save-precision", "bf16"])
    m32, m16 = onnx.load("t32.onnx"), onnx.load("t16.onnx")
    onnx.checker.check_model(m16)
    init16 = {t.name: t for t in m16.graph.initializer}
    casts = {n.output[0]: n for n in m16.graph.node if n.op_type == "Cast"}
    rounded = onnx.load("t32.onnx")
    f32_bytes = conv_bytes = 0
    for t in rounded.graph.initializer:
        a = numpy_helper.to_array(t)
        if t.data_type != onnx.TensorProto.FLOAT:
            if t.name not in init16 or not np.array_equal(numpy_helper.to_array(init16[t.name]), a):
                fail("initializer %s (not f32) changed" % t.name)
            continue
        f32_bytes += a.nbytes
        b = init16.get(t.name + ".bf16")
        if b is None:
            continue
        conv_bytes += a.nbytes
        if b.data_type != onnx.TensorProto.BFLOAT16 or t.name not in casts or casts[t.name].input[0] != t.name + ".bf16":
            fail("%s: bf16 copy of type %d, Cast %s" % (t.name, b.data_type, casts.get(t.name)))
        bits = np.frombuffer(b.raw_data, np.uint16) if b.raw_data else np.array(b.int32_data, np.uint16)
        want = bf16_round(a).ravel()
        if not np.array_equal(bits, want):
            fail("%s: bf16 bits differ from round-to-nearest-even of the fp32 weights at %d elements"
                 % (t.name, int(np.sum(bits != want))))
        t.CopyFrom(numpy_helper.from_array((want.astype(np.uint32) << 16).view(np.float32).reshape(a.shape), t.name))
    if conv_bytes < 0.9 * f32_bytes:
        fail("only %d of %d f32 initializer bytes were stored in bf16" % (conv_bytes, f32_bytes))
    onnx.save(rounded, "rounded.onnx")
    ratio = os.path.getsize("t16.onnx") / os.path.getsize("t32.onnx")
    if ratio > 0.6:
        fail("the bf16 file is %.2f of the fp32 one" % ratio)
    feeds = {}
    rng = np.random.default_rng(0)
    s16 = ort.InferenceSession("t16.onnx", providers=["CPUExecutionProvider"])
    sr = ort.InferenceSession("rounded.onnx", providers=["CPUExecutionProvider"])
    for i in s16.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        if "int" in i.type:
            feeds[i.name] = rng.integers(0, 32, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    o16, orr = s16.run(None, feeds)[0], sr.run(None, feeds)[0]
    if not np.allclose(o16, orr, rtol=1e-6, atol=1e-6 * np.abs(orr).max()):
        fail("onnxruntime: the bf16 file and the numpy-rounded weights differ by %g" % np.abs(o16 - orr).max())
    p = run(["train", "t16.onnx", "-o", "again.onnx", "--steps", "1"] + TRAIN[kind][:TRAIN[kind].index("--steps")])
    if p.returncode != 1 or "f32 master weights" not in p.stderr or ".bf16'" not in p.stderr or os.path.exists("again.onnx"):
        fail("training the bf16 file: exit %d\n%s" % (p.returncode, p.stderr))
    print("save_bf16 %s ok: %.0f%% of f32 bytes in bf16, file %.2fx, onnxruntime max |d| %g"
          % (kind, 100 * conv_bytes / f32_bytes, ratio, np.abs(o16 - orr).max()))


def export_like_lm(path, vocab=32, dim=16, seq=8):
    """ids [B,T] -> Reshape [-1,T] -> Gather(wte) -> * Unsqueeze(Cast(attention_mask)) -> MatMul -> logits."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((vocab, dim)) * 0.1).astype(np.float32), "wte"),
             numpy_helper.from_array((rng.standard_normal((dim, vocab)) * 0.1).astype(np.float32), "head"),
             numpy_helper.from_array(np.array([-1, seq], np.int64), "shape"),
             numpy_helper.from_array(np.array([2], np.int64), "axes")]
    nodes = [helper.make_node("Reshape", ["input_ids", "shape"], ["ids2"], name="reshape_ids"),
             helper.make_node("Gather", ["wte", "ids2"], ["emb"], name="embed"),
             helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT, name="mask_cast"),
             helper.make_node("Unsqueeze", ["maskf", "axes"], ["mask3"], name="mask_unsqueeze"),
             helper.make_node("Mul", ["emb", "mask3"], ["masked"], name="apply_mask"),
             helper.make_node("MatMul", ["masked", "head"], ["logits"], name="lm_head")]
    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq]),
           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", seq])]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", seq, vocab])]
    g = helper.make_graph(nodes, "export_like", ins, outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def export_inputs():
    export_like_lm("m.onnx")
    base = ["train", "m.onnx", "--batch", "4", "--lr", "0.5"]
    p = must(base + ["--steps", "30", "-o", "s.onnx", "--log", "s.csv"])
    if "Markov-chain tokens" not in p.stderr:
        fail("the reshaped ids were not recognised as a language model's:\n" + p.stderr)
    losses = np.array([r[1] for r in read_log("s.csv")])
    if not np.all(np.isfinite(losses)) or losses[-3:].mean() >= losses[:3].mean() - 0.05:
        fail("synthetic loss did not fall: %s" % losses)
    rng = np.random.default_rng(1)
    rng.integers(0, 32, 4000).astype(np.uint16).tofile("tok.bin")
    must(base + ["--steps", "3", "--tokens", "tok.bin", "-o", "t.onnx"])
    x = rng.integers(0, 32, (16, 8)).astype(np.int64)
    y = np.roll(x, -1, axis=1)
    np.save("x.npy", x)
    np.save("y.npy", y)
    np.save("ones.npy", np.ones((16, 8), np.int64))
    zeros = np.ones((16, 8), np.int64)
    zeros[:, 5:] = 0
    np.save("pad.npy", zeros)
    must(base + ["--steps", "4", "--data", "x.npy", "--labels", "y.npy", "-o", "d1.onnx"])
    must(base + ["--steps", "4", "--data", "input_ids=x.npy", "--data", "attention_mask=ones.npy", "--labels", "y.npy",
                 "-o", "d2.onnx"])
    must(base + ["--steps", "4", "--data", "attention_mask=pad.npy", "--data", "input_ids=x.npy", "--labels", "y.npy",
                 "-o", "d3.onnx"])
    w1, w2, w3 = weights("d1.onnx"), weights("d2.onnx"), weights("d3.onnx")
    if any(not np.array_equal(w1[n], w2[n]) for n in w1):
        fail("a left-out attention mask did not train as an all-ones mask file")
    if all(np.array_equal(w1[n], w3[n]) for n in w1):
        fail("a mask with zeros changed nothing")
    for extra, want in ((["--data", "nope=x.npy"], "no data input 'nope'"),
                        (["--data", "input_ids=x.npy", "--data", "attention_mask=y.npy"], "mask value"),
                        (["--data", "x.npy", "--data", "input_ids=x.npy"], "given twice")):
        p = run(base + ["--steps", "1", "--labels", "y.npy", "-o", "bad.onnx"] + extra)
        if p.returncode != 1 or want not in p.stderr or os.path.exists("bad.onnx"):
            fail("%s: exit %d, want 1 and %r:\n%s" % (extra, p.returncode, want, p.stderr))
    print("export_inputs ok: synthetic loss %.3f -> %.3f" % (losses[0], losses[-1]))


def kill(iterations):
    must(["gen"] + GEN["resnet"] + ["-o", "m.onnx"])
    args = ["train", "m.onnx", "--batch", "4", "--steps", "24", "--lr", "0.02", "--threads", "2"]
    must(args + ["-o", "ref.onnx"])
    env = dict(os.environ, SCORCH_TEST_SAVE_SLEEP_US="1500")
    shutil.rmtree("st", ignore_errors=True)  # a state left by an earlier run would be resumed, not tested
    rnd = random.Random(1234)
    started = False
    kills = 0
    t_save = None  # seconds from start to the first saved state, measured by the first run
    for i in range(iterations):
        cmd = [SCORCH] + args + ["-o", "k.onnx", "--save-every", "1"]
        cmd += ["--resume", "st"] if started else ["--state", "st"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        if t_save is None:
            # Kill times are scaled by how long this machine takes to load, plan and save once, so
            # a loaded machine (CI beside other jobs) still gets kills both before and while saving
            # instead of killing every run before its first save.
            while p.poll() is None and not os.path.exists("st/state.bin") and time.monotonic() - t0 < 300:
                time.sleep(0.005)
            t_save = time.monotonic() - t0
            time.sleep(rnd.uniform(0.0, 0.3) * t_save)
        else:
            time.sleep(rnd.uniform(0.3, 2.0) * t_save)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        out, err = p.communicate()
        if p.returncode not in (0, -signal.SIGKILL):
            fail("run %d exited %d:\n%s" % (i, p.returncode, err.decode()))
        if os.path.exists("st/state.bin"):
            started = True
            step = state_step("st/state.bin")
            print("iteration %d: killed=%s, state at step %d, tmp left: %s"
                  % (i, p.returncode != 0, step, os.path.exists("st/state.bin.tmp")))
    if not started:
        fail("no state was ever saved")
    must(args + ["-o", "k.onnx", "--resume", "st"], env=env)
    a, b = weights("ref.onnx"), weights("k.onnx")
    for n in a:
        if not np.array_equal(a[n], b[n]):
            fail("after %d kills and resumes, weight %s differs from the uninterrupted run" % (kills, n))
    print("kill ok: %d kills, final weights bit-identical" % kills)


def profile_table(out):
    """{op: (calls per step, ms per step)} and the total line's ms from --profile's table."""
    lines = out.splitlines()
    head = [i for i, l in enumerate(lines) if l.split()[:2] == ["op", "calls"]]
    if len(head) != 1:
        fail("no profile table in:\n" + out)
    ops, total = {}, None
    for l in lines[head[0] + 1:]:
        f = l.split()
        if f[:2] == ["total", "(kernels"]:
            total = float(f[-1])
            break
        ops[f[0]] = (float(f[1]), float(f[2]))
    if total is None:
        fail("profile table has no total line:\n" + out)
    return ops, total


def profile():
    must(["gen"] + GEN["resnet"] + ["-o", "m.onnx"])
    m = onnx.load("m.onnx")
    convs = sum(n.op_type == "Conv" for n in m.graph.node)
    params = sum(1 for t in m.graph.initializer
                 if t.data_type == onnx.TensorProto.FLOAT and not t.name.endswith(("running_mean", "running_var")))
    steps = 5
    p = must(["train", "m.onnx", "-o", "t.onnx", "--batch", "8", "--steps", str(steps), "--threads", "2",
              "--log", "log.csv", "--profile"])
    print(p.stdout)
    if "over steps 2 to %d" % steps not in p.stdout:
        fail("the profile does not say it covers steps 2 to %d:\n%s" % (steps, p.stdout))
    ops, total = profile_table(p.stdout)
    want = {"Conv": convs, "ConvGrad": convs, "SGDUpdate": params}
    for op, n in want.items():
        if op not in ops or ops[op][0] != n:
            fail("%s: %s calls per step in the profile, want %d" % (op, ops.get(op, ("none",))[0], n))
    if abs(sum(v[1] for v in ops.values()) - total) > 0.01 * total + 0.01:
        fail("the ops' times add up to %g, the total line says %g" % (sum(v[1] for v in ops.values()), total))
    elapsed = [r[4] for r in read_log("log.csv")]
    wall_ms = 1e3 * (elapsed[-1] - elapsed[0]) / (steps - 1)
    if total > wall_ms:
        fail("kernels take %.2f ms per step, more than the step itself (%.2f ms)" % (total, wall_ms))
    p = must(["train", "m.onnx", "-o", "t1.onnx", "--steps", "1", "--profile"])
    if "no steps after the first" not in p.stdout:
        fail("--steps 1 --profile does not say there is nothing to time:\n" + p.stdout)
    print("profile ok: %d Convs, %d SGD updates per step, kernels %.1f of %.1f ms per step"
          % (convs, params, total, wall_ms))


def main():
    global SCORCH
    SCORCH = os.path.abspath(sys.argv[1])
    what = sys.argv[2]
    if what == "roundtrip":
        roundtrip(sys.argv[3])
    elif what == "nan":
        nan()
    elif what == "export_inputs":
        export_inputs()
    elif what == "save_bf16":
        save_bf16(sys.argv[3])
    elif what == "fp16":
        fp16()
    elif what == "profile":
        profile()
    elif what == "kill":
        kill(int(sys.argv[3]) if len(sys.argv) > 3 else 6)
    else:
        fail("unknown check " + what)


if __name__ == "__main__":
    main()
