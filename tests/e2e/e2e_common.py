"""Shared harness of the end-to-end training tests against PyTorch (tests/e2e.cmake).

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
  sgd3     the weights after 3 SGD steps, Scorch in float32 against PyTorch in float64, with PyTorch
           float32's own distance from float64 as the yardstick: per tensor, max|ours - w64| <=
           8 max|w32 - w64| + 1e-5 max(update, lr) (check_weights_spread); adamw3 likewise.
The data set holds N samples and the trainer takes `batch` of them per step through its seeded
shuffle (train/train_data.c), replicated here by trainer_permutation so that the reference trains on
the very same batches: N = batch makes every step see the one batch (GPT, DRANet), N = 10 * batch
gives a fresh batch each step (resnet18). --oracle runs PyTorch float32 (onnx_torch at float32) in
place of Scorch through the same comparison: a float32 check means something only where that oracle
itself passes it with a margin (tests/e2e/README.md).
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
from onnx import numpy_helper

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
OURS = "scorch"  # what is compared with the reference: "torch-f32" under --oracle
# The curve check must have teeth: over the 10 steps the loss has to move by at least this much
# (relative), many times the tolerance, or an optimizer that did nothing could pass.
MIN_CURVE_CHANGE = 20 * CURVE_RTOL
# The *64 checks (model and data in float64 on both sides): gradients elementwise within
# 1e-9 |r| + 1e-10 max|r| + 1e-14; weights after WEIGHT_STEPS steps within 1e-4 of each tensor's
# total update (max|w_ref - w0|, at least lr) + 1e-12.
F64_TOL = (1e-9, 1e-10, 1e-14)
WEIGHT_STEPS = 3
# The sgd3 / adamw3 checks (float32 Scorch against float64 PyTorch): per tensor, within this many times
# PyTorch float32's own distance from float64, plus this share of the update (check_weights_spread).
# One float32 run is one sample of rounding noise: on efficientnet_b0 Scorch's step-1 gradient errors
# are 0.8-1.5x PyTorch float32's, yet after 3 SGD steps one squeeze-excitation bias is 5.7x (another
# tensor's 0.3x); a learning rate off by 0.1% is 74.8x the tolerance on mobilenet_v3_small.
SPREAD_FACTOR = 8
SPREAD_FLOOR = 1e-5
# The *_bf16 curve checks: Scorch's bf16 losses within this many times torch autocast's own
# largest relative difference from float32 (check_curve_bf16).
BF16_SPREADS = 2
# The *_fp16 curve checks: the bf16 allowance for the curve, since where training amplifies rounding
# (ResNet-18 on fresh batches: ReLU flips) fp16 and bf16 runs drift from float32 alike; and for the
# first loss, which only the forward pass's rounding moves, at most FP16_STEP1_SHARE of torch
# autocast bf16's first-loss difference (fp16's unit roundoff 2^-11 is 1/8 of bf16's 2^-8; measured
# ratios 0.02-0.24 on the three families), floored at FP16_STEP1_FLOOR. torch 1.13 has no fp16 autocast
# on the CPU ("addmm_impl_cpu_" not implemented for 'Half'), so its bf16 run is the measured scale. That
# scale is one sample and depends on the CPU: on a 2-core AMD EPYC without AVX-512, torch autocast's
# DRANet first loss is within 5.78e-5 of float32 (0.015 of bf16's unit roundoff), where Scorch's fp16
# one is 1.27e-4 away (0.26 of fp16's; the same with the build of 95b7ad0), so the floor is half of
# fp16's unit roundoff: a forward pass rounded as bf16 (unit 2^-8) still fails it where it moves the
# loss by a typical share of its own roundoff.
FP16_STEP1_SHARE = 0.5
FP16_STEP1_FLOOR = 2.0 ** -12
# fp16 starts at GradScaler's scale 2^16, which overflows the first gradients of the batch-norm nets
# here; GradScaler's answer is to skip those updates while the scale halves. Up to this many skipped
# steps are allowed, all at the start, and the torch references skip the same optimizer steps.
FP16_MAX_SKIPS = 3
WEIGHT_RTOL = 1e-4


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def parse_args(description, add_options=None):
    """add_options(parser): a model script's own experiment knobs (sizes, batch)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scorch", required=True, help="path of scorch-run")
    p.add_argument("--workdir", required=True, help="scratch folder (created)")
    p.add_argument("--check", required=True,
                   choices=["grads", "sgd3", "adamw3", "sgd10", "adamw10", "grads64", "sgd3_64", "adamw3_64", "sgd10_bf16", "adamw10_bf16",
                            "sgd10_fp16", "adamw10_fp16"])
    p.add_argument("--keep", action="store_true", help="print every tensor's comparison")
    p.add_argument("--lr", type=float, help="override the learning rate (experiments)")
    p.add_argument("--scorch-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for every `scorch-run train` (repeat for each word, e.g. "
                        "--scorch-arg=--param-block --scorch-arg=4KiB)")
    p.add_argument("--oracle", action="store_true",
                   help="run PyTorch float32 (onnx_torch at float32) in place of Scorch: measures how far the "
                        "float32 oracle itself is from the float64 reference in this setup")
    if add_options:
        add_options(p)
    a = p.parse_args()
    if a.oracle and a.check.endswith("64"):
        p.error("--oracle compares float32 runs; the *_64 checks are float64 on both sides")
    if a.oracle:
        global OURS
        OURS = "torch-f32"
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


def model_to_f64(model):
    """The same graph in float64: float initializers, Constant values, Cast-to-float and the float
    graph inputs/outputs become double. Resize scales stay float (the spec requires it)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for init in g.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name))
    resize_scales = {n.input[2] for n in g.node if n.op_type == "Resize" and len(n.input) > 2}
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == onnx.TensorProto.FLOAT \
                    and n.output[0] not in resize_scales:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if n.op_type == "Cast" and a.name == "to" and a.i == onnx.TensorProto.FLOAT:
                a.i = onnx.TensorProto.DOUBLE
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            v.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    return m


# The trainer's batches (train/train_data.c): with N samples, epoch e visits them in a Fisher-Yates
# permutation drawn from SplitMix64 keyed by (seed, PURPOSE_PERM, e), and step k takes the global
# sample numbers [k*B, (k+1)*B). Replicated here so that the reference sees the very same batches.
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_PURPOSE_PERM = 2
SEED = 0  # run_scorch passes --seed 0


def _mix64(x):
    x = (x + _GOLDEN) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def trainer_permutation(n, epoch, seed=SEED):
    s = _mix64(_mix64(seed ^ _mix64(_PURPOSE_PERM)) ^ epoch)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        s = (s + _GOLDEN) & _MASK
        j = _mix64(s) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class Case:
    """One model and one data set, as both sides see them. The data set holds N samples and the
    trainer takes `batch` of them per step (trainer_permutation); N = batch makes every step see the
    same batch, N = steps * batch a fresh batch each step. f64: the model and the float data are
    converted to float64 for both sides (the *64 checks)."""

    def __init__(self, name, model_path, x, y, train_args, f64=False, batch=None):
        if f64:
            model_path64 = model_path[:-len(".onnx")] + "_f64.onnx"
            onnx.save(model_to_f64(onnx.load(model_path)), model_path64)
            model_path = model_path64
            if x.dtype.kind == "f":
                x = x.astype(np.float64)
        self.f64 = f64
        self.name = name
        self.model_path = model_path
        self.x, self.y = x, y
        self.batch = batch or len(x)
        self.train_args = list(train_args)  # --batch / --seq binding the model's symbolic dims
        if "--batch" not in self.train_args:
            self.train_args += ["--batch", str(self.batch)]
        self.workdir = os.path.dirname(os.path.abspath(model_path))
        self.x_path = os.path.join(self.workdir, "x.npy")
        self.y_path = os.path.join(self.workdir, "y.npy")
        np.save(self.x_path, x)
        np.save(self.y_path, y)
        self.model = onnx.load(model_path)
        self._perms = {}

    def step_samples(self, step):
        """Indices into x / y of the batch of optimizer step `step` (0-based), in the trainer's order."""
        n, out = len(self.x), []
        for s in range(step * self.batch, (step + 1) * self.batch):
            e = s // n
            if e not in self._perms:
                self._perms[e] = trainer_permutation(n, e)
            out.append(self._perms[e][s % n])
        return np.array(out)


def torch_loss(logits, labels):
    """autodiff/loss.c's cross-entropy heads with torch (mean, ignore_index -100)."""
    labels = torch.as_tensor(labels).long()
    if logits.dim() == 3:  # LM: [B, T, V] vs [B, T]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    return F.cross_entropy(logits, labels, ignore_index=-100)


def reference_module(case):
    return OnnxTorch(case.model, dtype=REF_DTYPE, bn_training=True)


def forward_loss(module, case, step=0):
    idx = case.step_samples(step)
    outs = module({case.model.graph.input[0].name: torch.from_numpy(case.x[idx])})
    logits = outs[case.model.graph.output[0].name]
    return torch_loss(logits, case.y[idx])


def optimizer_args(optim):
    if optim == "sgd":
        return ["--optimizer", "sgd", "--lr", repr(SGD["lr"]), "--momentum", repr(SGD["momentum"]),
                "--weight-decay", repr(SGD["weight_decay"])]
    return ["--optimizer", "adamw", "--lr", repr(ADAMW["lr"]), "--weight-decay", repr(ADAMW["weight_decay"])]


def make_optimizer(optim, params):
    return torch.optim.SGD(params, **SGD) if optim == "sgd" else torch.optim.AdamW(params, **ADAMW)


def torch_train(module, case, steps, optim, params, on_step1=None, bf16=False, skip=()):
    """`steps` optimizer steps of `optim` (None: gradients only) on `params`, step k on the trainer's
    batch k; on_step1(loss) runs after the first backward. bf16: each forward under
    torch.autocast("cpu", dtype=torch.bfloat16), entered per step as a training loop does (its cache
    of bf16 weights lives as long as the region). skip: 1-based steps whose optimizer.step() is not
    called, as GradScaler.step skips it after an overflow. Returns the losses."""
    opt = make_optimizer(optim, params) if optim else None
    losses = []
    for step in range(steps):
        module.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = forward_loss(module, case, step)
        loss.backward()
        if step == 0 and on_step1:
            on_step1(loss)
        if opt and step + 1 not in skip:
            opt.step()
        losses.append(float(loss.detach()))
    return losses


def run_oracle(case, dump, log, steps, optim):
    """What run_scorch writes (step 1's gradients and loss as .npy, the loss log), computed by PyTorch
    float32 (onnx_torch at float32) instead of Scorch: --oracle."""
    module = OnnxTorch(case.model, dtype=torch.float32, bn_training=True)
    params = [p for _, p in module.named_onnx_parameters()]
    os.makedirs(dump, exist_ok=True)

    def write_dump(loss):
        np.save(os.path.join(dump, "loss.npy"), np.float32(loss.detach()))
        for n, p in module.named_onnx_parameters():
            if p.grad is not None:
                np.save(os.path.join(dump, sanitize(n) + ".npy"), p.grad.detach().numpy())
    t0 = time.time()
    losses = torch_train(module, case, steps, optim, params, write_dump)
    with open(log, "w") as f:
        f.write("step,loss\n" + "".join("%d,%.9g\n" % (i + 1, v) for i, v in enumerate(losses)))
    print("[%.1fs] oracle: PyTorch float32, %d step(s) of %s in place of Scorch" % (time.time() - t0, steps, optim))


def run_scorch(args, case, tag, steps, optim, extra_args=()):
    """`steps` steps of `optim` (None: one step at lr 0, the gradient dump only)."""
    out_dir = os.path.join(case.workdir, tag)
    os.makedirs(out_dir, exist_ok=True)
    dump = os.path.join(out_dir, "grads")
    log = os.path.join(out_dir, "metrics.csv")
    if args.oracle:
        run_oracle(case, dump, log, steps, optim)
        return dump, log
    extra = ["--steps", str(steps)] + (optimizer_args(optim) if optim else ["--lr", "0"])
    cmd = [args.scorch, "train", case.model_path, "-o", os.path.join(out_dir, "trained.onnx"),
           "--data", case.x_path, "--labels", case.y_path, "--dump-grads", dump, "--log", log,
           "--seed", str(SEED)] + case.train_args + extra + list(extra_args) + list(args.scorch_arg)
    sh(cmd)
    return dump, log


def read_losses(log):
    with open(log) as f:
        rows = list(csv.DictReader(f))
    return [float(r["loss"]) for r in rows]


def compare_tensor(ours, ref, tol=(RTOL, ATOL_REL, ATOL_ABS)):
    """(worst excess over the tolerance (<= 1 passes), flat index of it, max |d| / max |ref|)."""
    rtol, atol_rel, atol_abs = tol
    ref_max = float(np.max(np.abs(ref))) if ref.size else 0.0
    d = np.abs(ours.astype(np.float64) - ref)
    tol = rtol * np.abs(ref) + atol_rel * ref_max + atol_abs
    excess = d / tol
    i = int(np.argmax(excess)) if excess.size else 0
    return float(excess.reshape(-1)[i]) if excess.size else 0.0, i, float(d.max() / ref_max) if ref_max else float(d.max())


def check_grad_dump(dump, named_grads, loss_ref, verbose=False, tol=(RTOL, ATOL_REL, ATOL_ABS), check_loss=True):
    """Compares DIR/<name>.npy and DIR/loss.npy with the reference; returns the summary dict."""
    loss = float(np.load(os.path.join(dump, "loss.npy")))
    loss_rel = abs(loss - loss_ref) / abs(loss_ref)
    print("loss: %s %.9g  torch %.9g  rel diff %.3g%s" % (OURS, loss, loss_ref, loss_rel, "" if check_loss else " (not checked)"))
    problems = []
    if check_loss and loss_rel > LOSS_RTOL:
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
        excess, idx, rel = compare_tensor(ours, ref, tol)
        rows.append((excess, name, idx, rel, ours, ref))
    for extra in sorted(dumped):
        problems.append("the dump has '%s.npy' but torch has no such trainable parameter" % extra)
    rows.sort(key=lambda r: -r[0])
    worst_rel = max((r[3] for r in rows), default=0.0)
    print("%d gradients compared; max |d|/max|ref| over tensors: %.3g" % (len(rows), worst_rel))
    for excess, name, idx, rel, ours, ref in rows[: (len(rows) if verbose else 8)]:
        at = np.unravel_index(idx, ref.shape) if ref.ndim else ()
        print("  %-48s excess %.3g  max|d|/max|ref| %.3g  worst at %s: %s %.9g torch %.9g"
              % (name, excess, rel, tuple(int(v) for v in at), OURS, ours.reshape(-1)[idx], ref.reshape(-1)[idx]))
    bad = [r for r in rows if r[0] > 1.0]
    if bad:
        excess, name, idx, rel, ours, ref = bad[0]
        at = tuple(int(v) for v in np.unravel_index(idx, ref.shape)) if ref.ndim else ()
        problems.append("%d of %d gradients out of tolerance; worst '%s' at %s: %s %.9g torch %.9g "
                        "(|d| is %.3g x the tolerance rtol %g + %g*max|ref| + %g; max|d|/max|ref| %.3g)"
                        % ((len(bad), len(rows), name, at, OURS, ours.reshape(-1)[idx], ref.reshape(-1)[idx], excess) + tol
                           + (rel,)))
    return {"loss_rel": loss_rel, "worst_excess": rows[0][0] if rows else 0.0, "worst_rel": worst_rel,
            "problems": problems}


def reference_grads(module, case):
    module.zero_grad(set_to_none=True)
    loss = forward_loss(module, case, 0)
    loss.backward()
    named = [(n, None if p.grad is None else p.grad.detach().numpy().astype(np.float64))
             for n, p in module.named_onnx_parameters()]
    return float(loss.detach()), named


def check_grads(args, case, extra_refs=()):
    """extra_refs: (label, loss, named grads) of other references to cross-check the interpreter with."""
    dump, _ = run_scorch(args, case, "grads", 1, None)
    t0 = time.time()
    loss_ref, named = reference_grads(reference_module(case), case)
    print("[%.1fs] torch reference (onnx_torch, %s)" % (time.time() - t0, REF_DTYPE))
    for label, other_loss, other_named in extra_refs:
        other = dict(other_named)
        worst = 0.0
        # a tensor whose gradient is zero in exact arithmetic (a bias right before a batch norm in
        # training mode, which subtracts the mean) holds rounding noise on both sides: compared
        # against 1e-7 of the model's largest gradient instead of its own noise
        floor = 1e-7 * max([float(np.abs(o).max()) for o in other.values() if o is not None and o.size] + [1e-30])
        for n, g in named:
            o = other.get(n)
            if g is None or o is None:
                if (g is None) != (o is None):
                    fail("cross-check %s: '%s' has a gradient on one side only" % (label, n))
                continue
            worst = max(worst, float(np.abs(g - o).max() / max(np.abs(o).max(), floor)))
        print("cross-check onnx_torch vs %s: loss %.12g vs %.12g, max |d|/max|g| %.3g"
              % (label, loss_ref, other_loss, worst))
        # 1e-8 on the loss: an exported graph carries its float32 constants (LayerNorm's epsilon, the
        # attention scale) into the float64 model by value, which moves a ViT's loss by 1e-9
        if abs(loss_ref - other_loss) > 1e-8 * abs(other_loss) or worst > 1e-6:
            fail("the ONNX interpreter disagrees with %s (loss %.12g vs %.12g, grads %.3g): the reference is wrong"
                 % (label, loss_ref, other_loss, worst))
    if case.f64:
        # float64 on both sides: rounding is ~1e-16, so anything beyond 1e-9 is a wrong rule. The
        # loss is not compared: `--dump-grads` writes loss.npy as float32 whatever the model's dtype.
        r = check_grad_dump(dump, named, loss_ref, args.keep, tol=F64_TOL, check_loss=False)
    else:
        r = check_grad_dump(dump, named, loss_ref, args.keep)
    if r["problems"]:
        fail("%s grads: %s" % (case.name, "; ".join(r["problems"])))
    print("PASS %s grads: loss rel diff %.3g, worst gradient excess %.3g of tolerance, max |d|/max|ref| %.3g"
          % (case.name, r["loss_rel"], r["worst_excess"], r["worst_rel"]))


def trained_params(module, dump, case):
    """The reference's parameters that the dump says Scorch trains (requires_grad off for the rest)."""
    trained = {f[:-4] for f in os.listdir(dump) if f.endswith(".npy")} - {"loss"}
    params = []
    for n, p in module.named_onnx_parameters():
        p.requires_grad_(sanitize(n) in trained)
        if p.requires_grad:
            params.append((n, p))
    if len(params) != len(trained):
        fail("%s: Scorch trains %d parameters, torch found %d of them" % (case.name, len(trained), len(params)))
    return params


def check_curve(args, case, optim, lr=None):
    """lr: the model's learning rate for this optimizer (None: SGD / ADAMW's); --lr overrides it."""
    lr = args.lr or lr
    if lr:
        (SGD if optim == "sgd" else ADAMW)["lr"] = lr
    dump, log = run_scorch(args, case, optim + str(STEPS), STEPS, optim)
    ours = read_losses(log)
    if len(ours) != STEPS:
        fail("%s: %d losses in the log, expected %d" % (log, len(ours), STEPS))
    module = reference_module(case)
    params = [p for _, p in trained_params(module, dump, case)]
    t0 = time.time()
    ref = torch_train(module, case, STEPS, optim, params)
    print("[%.1fs] torch reference, %d steps of %s (%s), %s" % (time.time() - t0, STEPS, optim,
          SGD if optim == "sgd" else ADAMW, "one batch" if len(case.x) == case.batch else
          "%d samples, batch %d" % (len(case.x), case.batch)))
    worst, worst_step = 0.0, 0
    for i, (a, b) in enumerate(zip(ours, ref)):
        rel = abs(a - b) / abs(b)
        print("  step %2d  %s %.9g  torch %.9g  rel diff %.3g" % (i + 1, OURS, a, b, rel))
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


def check_weights(args, case, optim):
    """WEIGHT_STEPS optimizer steps in float64 on both sides; compares the trained weights (-o)."""
    tag = "%s%d_64" % (optim, WEIGHT_STEPS)
    lr = SGD["lr"] if optim == "sgd" else ADAMW["lr"]
    dump, _ = run_scorch(args, case, tag, WEIGHT_STEPS, optim)
    ours = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(case.workdir, tag, "trained.onnx")).graph.initializer}
    module = reference_module(case)
    params = trained_params(module, dump, case)
    w0 = {n: p.detach().numpy().copy() for n, p in params}
    torch_train(module, case, WEIGHT_STEPS, optim, [p for _, p in params])
    rows = []
    for n, p in params:
        ref = p.detach().numpy()
        upd = float(np.abs(ref - w0[n]).max())
        d = float(np.abs(ours[n].astype(np.float64) - ref).max())
        # floor at lr: a parameter the loss hardly depends on (a key bias under softmax) gets an
        # AdamW update of noise/(noise + eps), which no two implementations share
        rows.append((d / (WEIGHT_RTOL * max(upd, lr) + 1e-12), n, d, upd))
    rows.sort(reverse=True)
    for ex, n, d, upd in rows[:5]:
        print("  %-48s max|d| %.3g  max update %.3g  excess %.3g" % (n, d, upd, ex))
    if rows and rows[0][0] > 1:
        fail("%s %s: weights after %d steps (float64): '%s' differs by %.3g, its update is %.3g (tolerance %g of it, or of lr)"
             % (case.name, tag, WEIGHT_STEPS, rows[0][1], rows[0][2], rows[0][3], WEIGHT_RTOL))
    print("PASS %s %s: %d weight tensors, worst max|d|/max|update| %.3g" % (case.name, tag, len(rows), max(r[2] / max(r[3], 1e-300) for r in rows)))


def check_weights_spread(args, case, optim):
    """WEIGHT_STEPS optimizer steps, Scorch in float32, against PyTorch in float64 (the reference)
    with PyTorch's own float32 run as the yardstick: per trained tensor, Scorch's max |w - w64| must be
    at most SPREAD_FACTOR times PyTorch float32's max |w32 - w64|, plus SPREAD_FLOOR of the tensor's
    float64 update (max |w64 - w0|, at least lr: float32's resolution of a weight near 1 against an
    update of lr size). Where the case amplifies rounding the yardstick grows with it; where it does
    not, the check is as tight as float32 allows."""
    tag = "%s%d" % (optim, WEIGHT_STEPS)
    lr = SGD["lr"] if optim == "sgd" else ADAMW["lr"]
    dump, _ = run_scorch(args, case, tag, WEIGHT_STEPS, optim)
    ours = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(case.workdir, tag, "trained.onnx")).graph.initializer}
    trained = {}
    for dtype in (torch.float64, torch.float32):
        module = OnnxTorch(case.model, dtype=dtype, bn_training=True)
        params = trained_params(module, dump, case)
        w0 = {n: p.detach().numpy().astype(np.float64) for n, p in params}
        torch_train(module, case, WEIGHT_STEPS, optim, [p for _, p in params])
        trained[dtype] = {n: p.detach().numpy().astype(np.float64) for n, p in params}
    rows = []
    for n, ref in trained[torch.float64].items():
        upd = float(np.abs(ref - w0[n]).max())
        d = float(np.abs(ours[n].astype(np.float64) - ref).max())
        spread = float(np.abs(trained[torch.float32][n] - ref).max())
        tol = SPREAD_FACTOR * spread + SPREAD_FLOOR * max(upd, lr)
        rows.append((d / tol, n, d, spread, upd))
    rows.sort(reverse=True)
    for ex, n, d, spread, upd in rows[:5]:
        print("  %-48s max|d| %.3g  torch f32 %.3g  max update %.3g  excess %.3g" % (n, d, spread, upd, ex))
    if rows and rows[0][0] > 1:
        fail("%s %s: weights after %d steps: '%s' differs from float64 by %.3g; PyTorch float32 by %.3g (tolerance "
             "%g times that + %g of the update %.3g)" % (case.name, tag, WEIGHT_STEPS, rows[0][1], rows[0][2], rows[0][3],
                                                        SPREAD_FACTOR, SPREAD_FLOOR, rows[0][4]))
    print("PASS %s %s: %d weight tensors, worst excess %.3g of the tolerance (%g x PyTorch float32's own spread from "
          "float64 + %g of the update)" % (case.name, tag, len(rows), rows[0][0] if rows else 0, SPREAD_FACTOR, SPREAD_FLOOR))


def check_curve_low(args, case, optim, lr=None, precision="bf16"):
    """STEPS steps of `optim` with `--precision bf16` (or fp16), against PyTorch's float32 module trained
    in float32 and under torch.autocast("cpu", dtype=torch.bfloat16). A 16-bit curve is checked against
    the float32 one with PyTorch's own spread as the scale: Scorch's bf16 (and fp16) losses may differ
    from torch's float32 losses by at most BF16_SPREADS times the largest relative difference torch's
    autocast run shows against them (floored at CURVE_RTOL, the float32 curve check's); fp16's first
    loss is held to FP16_STEP1_SHARE. One run's spread is one sample of how bf16 rounding perturbs training, and where
    training amplifies rounding (ResNet-18 on fresh batches) two bf16 runs drift apart as either does
    from float32; the distance to torch's bf16 curve is printed too. fp16 runs with dynamic loss
    scaling (FP16_MAX_SKIPS)."""
    lr = args.lr or lr
    if lr:
        (SGD if optim == "sgd" else ADAMW)["lr"] = lr
    tag = "%s%d_%s" % (optim, STEPS, precision)
    dump, log = run_scorch(args, case, tag, STEPS, optim, ["--precision", precision])
    ours = read_losses(log)
    if len(ours) != STEPS:
        fail("%s: %d losses in the log, expected %d" % (log, len(ours), STEPS))
    with open(log) as f:
        skipped = [int(r["step"]) for r in csv.DictReader(f) if r.get("skipped", "0") not in ("0", "")]
    if len(skipped) > FP16_MAX_SKIPS or skipped != list(range(1, len(skipped) + 1)):
        fail("%s %s: fp16 skipped the updates of steps %s (at most the first %d may be skipped while the "
             "loss scale comes down)" % (case.name, tag, skipped, FP16_MAX_SKIPS))
    if skipped:
        print("fp16 skipped the updates of steps %s (gradient overflow); the torch runs skip them too" % skipped)

    def torch_run(bf16):
        module = OnnxTorch(case.model, dtype=torch.float32, bn_training=True)
        params = [p for _, p in trained_params(module, dump, case)]
        return torch_train(module, case, STEPS, optim, params, bf16=bf16, skip=set(skipped))
    t0 = time.time()
    ref32, ref16 = torch_run(False), torch_run(True)
    print("[%.1fs] torch float32 and autocast bf16, %d steps of %s" % (time.time() - t0, STEPS, optim))
    rel = lambda a, b: abs(a - b) / abs(b)
    spread = max(rel(b, c) for b, c in zip(ref16, ref32))
    share = BF16_SPREADS
    tol = max(share * spread, CURVE_RTOL)
    worst, worst_step, worst16 = 0.0, 0, 0.0
    for i, (a, b, c) in enumerate(zip(ours, ref16, ref32)):
        print("  step %2d  scorch-%s %.7g  torch-bf16 %.7g  torch-f32 %.7g  | scorch vs f32 %.3g, torch-bf16 vs f32 "
              "%.3g, scorch vs torch-bf16 %.3g" % (i + 1, precision, a, b, c, rel(a, c), rel(b, c), rel(a, b)))
        if rel(a, c) > worst:
            worst, worst_step = rel(a, c), i + 1
        worst16 = max(worst16, rel(a, b))
    if worst < 1e-6:
        fail("%s %s: every loss is within %.3g of torch's float32: --precision %s changed nothing"
             % (case.name, tag, worst, precision))
    if worst > tol:
        fail("%s %s: step %d loss %.7g vs torch float32 %.7g (rel diff %.3g > %.3g, %g times torch autocast's "
             "own largest difference from float32)" % (case.name, tag, worst_step, ours[worst_step - 1],
                                                       ref32[worst_step - 1], worst, tol, share))
    if precision == "fp16":
        step1, step1_bf16 = rel(ours[0], ref32[0]), rel(ref16[0], ref32[0])
        if step1 > max(FP16_STEP1_SHARE * step1_bf16, FP16_STEP1_FLOOR):
            fail("%s %s: the first loss %.7g differs from torch float32's %.7g by %.3g, more than %g of torch autocast "
                 "bf16's %.3g and more than %.3g (half of fp16's unit roundoff): fp16 should round the forward pass "
                 "8x finer than bf16" % (case.name, tag, ours[0], ref32[0], step1, FP16_STEP1_SHARE, step1_bf16,
                                         FP16_STEP1_FLOOR))
        print("first loss: fp16 vs float32 %.3g, torch autocast bf16 vs float32 %.3g" % (step1, step1_bf16))
    print("PASS %s %s: %s vs torch float32 at most %.3g (step %d), torch autocast bf16's spread %.3g (allowed %.3g); "
          "vs torch autocast bf16 at most %.3g" % (case.name, tag, precision, worst, worst_step, spread, tol, worst16))


def run_check(args, case, extra_refs=lambda: (), curve_lr=None):
    """curve_lr: {"sgd": lr, "adamw": lr} of the model's sgd10 / adamw10 checks (default SGD / ADAMW)."""
    if args.check in ("grads", "grads64"):
        check_grads(args, case, extra_refs())
    elif args.check in ("sgd3", "adamw3"):
        check_weights_spread(args, case, args.check[:-1])
    elif args.check.endswith(("_bf16", "_fp16")):
        precision = args.check[-4:]
        optim = args.check[:-len(str(STEPS) + "_" + precision)]
        check_curve_low(args, case, optim, (curve_lr or {}).get(optim), precision)
    elif args.check.endswith("_64"):
        check_weights(args, case, args.check[:-len("%d_64" % WEIGHT_STEPS)])
    else:
        optim = args.check[:-len(str(STEPS))]
        check_curve(args, case, optim, (curve_lr or {}).get(optim))
