"""Shared harness of the end-to-end training tests against PyTorch (tests/e2e.cmake, issue 3 "Tests").

Each model script (e2e_resnet18.py, e2e_dranet.py, e2e_gpt.py) writes an ONNX model and seeded data
(x.npy, y.npy) into --workdir, then runs one check with `scorch-run train` on that data and with
onnx_torch.OnnxTorch (the same ONNX graph and weights run by torch autograd, float64) on the same
data:
  grads    loss and every trainable parameter's gradient at step 1 (`--dump-grads`).
           Loss: |ours - ref| <= 1e-4 |ref|. Gradients, elementwise, per tensor g with reference r:
               |g - r| <= RTOL |r| + ATOL_REL * max|r| + ATOL_ABS      (RTOL 1e-4, ATOL_REL 1e-5,
                                                                       ATOL_ABS 1e-7)
           The atol relative to the tensor's largest reference magnitude accepts fp32 rounding on
           elements near zero (cancellations in sums of many terms) without loosening the check of
           the elements that carry the gradient. The parameter sets must match too: every float
           initializer except the BatchNormalization statistics (what autodiff/training.c trains).
  sgd10    the loss of each of 10 steps of SGD (momentum 0.9, weight decay 1e-4), vs
           torch.optim.SGD: |ours - ref| <= 1e-3 |ref| at every step.
  adamw10  the same with AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01) vs
           torch.optim.AdamW.
The data set holds exactly one batch, so every step sees every sample; the trainer's per-epoch
shuffle only reorders the batch, which changes neither the mean loss nor the batch statistics.
The reference runs in float64: it is then the exact value up to 1e-12 or so, and the tolerances
above measure Scorch's float32 error alone. Losses follow autodiff/loss.c: mean softmax
cross-entropy with ignore_index -100, over [N, C] vs [N], [N, C, H, W] vs [N, H, W], and language
model logits [B, T, V] flattened to [B*T, V] vs next-token labels [B*T].
A check fails through the exit code with the worst parameter (and element) or step named.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_torch import OnnxTorch  # noqa: E402

RTOL = 1e-4
ATOL_REL = 1e-5
ATOL_ABS = 1e-7
LOSS_RTOL = 1e-4
CURVE_RTOL = 1e-3
STEPS = 10
SGD = dict(lr=0.05, momentum=0.9, weight_decay=1e-4)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
REF_DTYPE = torch.float64
# The curve check must have teeth: over the 10 steps the loss has to move by at least this much
# (relative), many times the tolerance, or an optimizer that did nothing could pass.
MIN_CURVE_CHANGE = 20 * CURVE_RTOL


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scorch", required=True, help="path of scorch-run")
    p.add_argument("--workdir", required=True, help="scratch folder (created)")
    p.add_argument("--check", required=True, choices=["grads", "sgd10", "adamw10"])
    p.add_argument("--keep", action="store_true", help="print every tensor's comparison")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    return a


def sh(cmd, cwd=None):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(cmd), p.returncode, p.stdout[-4000:], p.stderr[-4000:]))
    print("[%.1fs] %s" % (time.time() - t0, " ".join(cmd)))
    return p


def sanitize(name):
    """The file name `--dump-grads` gives a parameter (train/trainer.h)."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if not name or name.startswith("."):
        s += "_"
    return s


class Case:
    """One model and one data set, as both sides see them."""

    def __init__(self, name, model_path, x, y, train_args):
        self.name = name
        self.model_path = model_path
        self.x, self.y = x, y
        self.train_args = list(train_args)  # --batch / --seq binding the model's symbolic dims
        self.workdir = os.path.dirname(os.path.abspath(model_path))
        self.x_path = os.path.join(self.workdir, "x.npy")
        self.y_path = os.path.join(self.workdir, "y.npy")
        np.save(self.x_path, x)
        np.save(self.y_path, y)
        self.model = onnx.load(model_path)


def torch_loss(logits, labels):
    """autodiff/loss.c's cross-entropy heads with torch (mean, ignore_index -100)."""
    labels = torch.as_tensor(labels).long()
    if logits.dim() == 3:  # LM: [B, T, V] vs [B, T]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    return F.cross_entropy(logits, labels, ignore_index=-100)


def reference_module(case):
    return OnnxTorch(case.model, dtype=REF_DTYPE, bn_training=True)


def forward_loss(module, case):
    outs = module({case.model.graph.input[0].name: torch.from_numpy(case.x)})
    logits = outs[case.model.graph.output[0].name]
    return torch_loss(logits, case.y)


def run_scorch(args, case, tag, extra):
    out_dir = os.path.join(case.workdir, tag)
    os.makedirs(out_dir, exist_ok=True)
    dump = os.path.join(out_dir, "grads")
    log = os.path.join(out_dir, "metrics.csv")
    cmd = [args.scorch, "train", case.model_path, "-o", os.path.join(out_dir, "trained.onnx"),
           "--data", case.x_path, "--labels", case.y_path, "--dump-grads", dump, "--log", log,
           "--seed", "0"] + case.train_args + extra
    sh(cmd)
    return dump, log


def read_losses(log):
    with open(log) as f:
        rows = list(csv.DictReader(f))
    return [float(r["loss"]) for r in rows]


def compare_tensor(ours, ref):
    """(worst excess over the tolerance (<= 1 passes), flat index of it, max |d| / max |ref|)."""
    ref_max = float(np.max(np.abs(ref))) if ref.size else 0.0
    d = np.abs(ours.astype(np.float64) - ref)
    tol = RTOL * np.abs(ref) + ATOL_REL * ref_max + ATOL_ABS
    excess = d / tol
    i = int(np.argmax(excess)) if excess.size else 0
    return float(excess.reshape(-1)[i]) if excess.size else 0.0, i, float(d.max() / ref_max) if ref_max else float(d.max())


def check_grad_dump(dump, named_grads, loss_ref, verbose=False):
    """Compares DIR/<name>.npy and DIR/loss.npy with the reference; returns the summary dict."""
    loss = float(np.load(os.path.join(dump, "loss.npy")))
    loss_rel = abs(loss - loss_ref) / abs(loss_ref)
    print("loss: scorch %.9g  torch %.9g  rel diff %.3g" % (loss, loss_ref, loss_rel))
    problems = []
    if loss_rel > LOSS_RTOL:
        problems.append("loss %.9g vs torch %.9g (rel diff %.3g > %g)" % (loss, loss_ref, loss_rel, LOSS_RTOL))
    dumped = {f[:-4] for f in os.listdir(dump) if f.endswith(".npy")} - {"loss"}
    rows = []
    for name, g in named_grads:
        fname = sanitize(name)
        if fname not in dumped:
            if g is None or not np.any(g):
                continue  # the loss does not depend on it: Scorch computes nothing for it either
            problems.append("parameter '%s' has a gradient in torch (max %.3g) but none in the dump" % (name, np.abs(g).max()))
            continue
        dumped.discard(fname)
        ours = np.load(os.path.join(dump, fname + ".npy"))
        ref = np.zeros(ours.shape) if g is None else g
        if ours.shape != ref.shape:
            problems.append("parameter '%s': gradient shape %s, torch %s" % (name, ours.shape, ref.shape))
            continue
        excess, idx, rel = compare_tensor(ours, ref)
        rows.append((excess, name, idx, rel, ours, ref))
    for extra in sorted(dumped):
        problems.append("the dump has '%s.npy' but torch has no such trainable parameter" % extra)
    rows.sort(key=lambda r: -r[0])
    worst_rel = max((r[3] for r in rows), default=0.0)
    print("%d gradients compared; max |d|/max|ref| over tensors: %.3g" % (len(rows), worst_rel))
    for excess, name, idx, rel, ours, ref in rows[: (len(rows) if verbose else 8)]:
        at = np.unravel_index(idx, ref.shape) if ref.ndim else ()
        print("  %-48s excess %.3g  max|d|/max|ref| %.3g  worst at %s: scorch %.9g torch %.9g"
              % (name, excess, rel, tuple(int(v) for v in at), ours.reshape(-1)[idx], ref.reshape(-1)[idx]))
    bad = [r for r in rows if r[0] > 1.0]
    if bad:
        excess, name, idx, rel, ours, ref = bad[0]
        at = tuple(int(v) for v in np.unravel_index(idx, ref.shape)) if ref.ndim else ()
        problems.append("%d of %d gradients out of tolerance; worst '%s' at %s: scorch %.9g torch %.9g "
                        "(|d| is %.3g x the tolerance rtol %g + %g*max|ref| + %g; max|d|/max|ref| %.3g)"
                        % (len(bad), len(rows), name, at, ours.reshape(-1)[idx], ref.reshape(-1)[idx], excess,
                           RTOL, ATOL_REL, ATOL_ABS, rel))
    return {"loss_rel": loss_rel, "worst_excess": rows[0][0] if rows else 0.0, "worst_rel": worst_rel,
            "problems": problems}


def reference_grads(module, case):
    module.zero_grad(set_to_none=True)
    loss = forward_loss(module, case)
    loss.backward()
    named = [(n, None if p.grad is None else p.grad.detach().numpy().astype(np.float64))
             for n, p in module.named_onnx_parameters()]
    return float(loss.detach()), named


def check_grads(args, case, extra_refs=()):
    """extra_refs: (label, loss, named grads) of other references to cross-check the interpreter with."""
    dump, _ = run_scorch(args, case, "grads", ["--steps", "1", "--lr", "0"])
    t0 = time.time()
    loss_ref, named = reference_grads(reference_module(case), case)
    print("[%.1fs] torch reference (onnx_torch, %s)" % (time.time() - t0, REF_DTYPE))
    for label, other_loss, other_named in extra_refs:
        other = dict(other_named)
        worst = 0.0
        for n, g in named:
            o = other.get(n)
            if g is None or o is None:
                if (g is None) != (o is None):
                    fail("cross-check %s: '%s' has a gradient on one side only" % (label, n))
                continue
            worst = max(worst, float(np.abs(g - o).max() / max(np.abs(o).max(), 1e-30)))
        print("cross-check onnx_torch vs %s: loss %.12g vs %.12g, max |d|/max|g| %.3g"
              % (label, loss_ref, other_loss, worst))
        if abs(loss_ref - other_loss) > 1e-9 * abs(other_loss) or worst > 1e-8:
            fail("the ONNX interpreter disagrees with %s (loss %.12g vs %.12g, grads %.3g): the reference is wrong"
                 % (label, loss_ref, other_loss, worst))
    r = check_grad_dump(dump, named, loss_ref, args.keep)
    if r["problems"]:
        fail("%s grads: %s" % (case.name, "; ".join(r["problems"])))
    print("PASS %s grads: loss rel diff %.3g, worst gradient excess %.3g of tolerance, max |d|/max|ref| %.3g"
          % (case.name, r["loss_rel"], r["worst_excess"], r["worst_rel"]))


def check_curve(args, case, optim):
    if optim == "sgd":
        extra = ["--optimizer", "sgd", "--lr", repr(SGD["lr"]), "--momentum", repr(SGD["momentum"]),
                 "--weight-decay", repr(SGD["weight_decay"])]
    else:
        extra = ["--optimizer", "adamw", "--lr", repr(ADAMW["lr"]), "--weight-decay", repr(ADAMW["weight_decay"])]
    dump, log = run_scorch(args, case, optim + str(STEPS), ["--steps", str(STEPS)] + extra)
    ours = read_losses(log)
    if len(ours) != STEPS:
        fail("%s: %d losses in the log, expected %d" % (log, len(ours), STEPS))
    trained = {f[:-4] for f in os.listdir(dump) if f.endswith(".npy")} - {"loss"}
    module = reference_module(case)
    params = []
    for n, p in module.named_onnx_parameters():
        p.requires_grad_(sanitize(n) in trained)
        if p.requires_grad:
            params.append(p)
    if len(params) != len(trained):
        fail("%s: Scorch trains %d parameters, torch found %d of them" % (case.name, len(trained), len(params)))
    if optim == "sgd":
        opt = torch.optim.SGD(params, **SGD)
    else:
        opt = torch.optim.AdamW(params, **ADAMW)
    t0 = time.time()
    ref = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(module, case)
        loss.backward()
        opt.step()
        ref.append(float(loss.detach()))
    print("[%.1fs] torch reference, %d steps of %s" % (time.time() - t0, STEPS, type(opt).__name__))
    worst, worst_step = 0.0, 0
    for i, (a, b) in enumerate(zip(ours, ref)):
        rel = abs(a - b) / abs(b)
        print("  step %2d  scorch %.9g  torch %.9g  rel diff %.3g" % (i + 1, a, b, rel))
        if rel > worst:
            worst, worst_step = rel, i + 1
    if worst > CURVE_RTOL:
        fail("%s %s%d: step %d loss %.9g vs torch %.9g (rel diff %.3g > %g)"
             % (case.name, optim, STEPS, worst_step, ours[worst_step - 1], ref[worst_step - 1], worst, CURVE_RTOL))
    change = abs(ref[-1] - ref[0]) / abs(ref[0])
    if change < MIN_CURVE_CHANGE:
        fail("%s %s%d: the torch loss moved only %.3g (relative) over %d steps: too flat to test the optimizer"
             % (case.name, optim, STEPS, change, STEPS))
    print("PASS %s %s%d: max rel diff %.3g (step %d); loss %.6g -> %.6g"
          % (case.name, optim, STEPS, worst, worst_step, ref[0], ref[-1]))


def run_check(args, case, extra_refs=lambda: ()):
    if args.check == "grads":
        check_grads(args, case, extra_refs())
    else:
        check_curve(args, case, args.check[:-len(str(STEPS))])
