#!/usr/bin/env python3
"""Oracle test: Scorch's forward pass against onnxruntime (CPUExecutionProvider) on one model.

    oracle.py --scorch-run BIN --workdir DIR MODEL_SOURCE [options]

MODEL_SOURCE is one of
  --model FILE         an existing .onnx file
  --gen "ARGS"         `scorch-run gen ARGS -o DIR/model.onnx` (e.g. "resnet --depth 18 --image 64")
  --torch KIND         tests/oracle/export_torch.py KIND, run with --torch-python (Debian's python3
                       with torch 1.13); PyTorch's own output on the same inputs is a second
                       reference, and onnxruntime must agree with it before Scorch is judged

Seeded inputs are written as DIR/inputs/<name>.npy (floats ~ N(0,1); integer inputs feeding a
Gather are drawn below the gathered table's first dim, i.e. valid token ids), then
`scorch-run run MODEL --input NAME=FILE ... --output-dir DIR/scorch` and onnxruntime run on them.
Each output must match in dtype and shape and satisfy |scorch - ort| <= atol + rtol * |ort|
(defaults rtol 1e-4, atol 1e-5; --atol-of-max raises atol for outputs whose scale makes 1e-5 finer
than float32 can resolve); a failure prints the worst element.

With --roundtrip BIN the model is also loaded and saved by BIN (tests/oracle/roundtrip.c:
sc_model_load + sc_model_save); the saved file must have bit-identical initializers and give
bit-identical onnxruntime outputs.
"""
import argparse
import os
import shlex
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
    "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8, "tensor(float16)": np.float16,
}


class OracleFailure(Exception):
    pass


def run(cmd, **kw):
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], **kw)
    if r.returncode != 0:
        raise OracleFailure(f"command failed with exit code {r.returncode}: {cmd[0]} {cmd[1] if len(cmd) > 1 else ''}")


def gather_table_rows(model, input_name):
    """First dim of the table a Gather indexes with this input, or None."""
    inits = {i.name: list(i.dims) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == input_name and n.input[0] in inits:
            return inits[n.input[0]][0]
    return None


def concrete_shape(meta, batch, seq):
    """Binds symbolic dims as scorch-run does: dim 0 -> batch, dim 1 of integer inputs -> seq."""
    shape = []
    for d, dim in enumerate(meta.shape):
        if isinstance(dim, int) and dim >= 0:
            shape.append(dim)
        elif d == 0:
            shape.append(batch)
        elif d == 1 and meta.type in ("tensor(int64)", "tensor(int32)"):
            shape.append(seq)
        else:
            raise OracleFailure(f"input {meta.name}: symbolic dim {d} ({dim}) has no binding")
    return shape


def make_inputs(model_path, sess, batch, seq, seed, int_high):
    model = onnx.load(model_path, load_external_data=False)
    rng = np.random.default_rng(seed)
    feeds = {}
    for meta in sess.get_inputs():
        dtype = ORT_TYPES.get(meta.type)
        if dtype is None:
            raise OracleFailure(f"input {meta.name}: type {meta.type} not handled by the oracle")
        shape = concrete_shape(meta, batch, seq)
        if np.issubdtype(dtype, np.floating):
            feeds[meta.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[meta.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            high = gather_table_rows(model, meta.name) or int_high
            feeds[meta.name] = rng.integers(0, high, shape).astype(dtype)
    return feeds


def mask_left_out_check(args, model_path, sess, feeds, names):
    """An integer input named like a mask that `run` is not given must be all ones (attend everywhere):
    scorch without it against onnxruntime fed ones."""
    masks = [m.name for m in sess.get_inputs() if "mask" in m.name.lower() and np.issubdtype(feeds[m.name].dtype, np.integer)]
    if not masks:
        return
    ones = dict(feeds, **{m: np.ones_like(feeds[m]) for m in masks})
    expected = dict(zip(names, sess.run(None, ones)))
    got = scorch_outputs(args, model_path, {k: v for k, v in feeds.items() if k not in masks}, names)
    for name in names:
        err = compare(f"output {name} with {masks} left out", got[name], expected[name], args.rtol, args.atol)
        print(f"scorch with {', '.join(masks)} left out vs onnxruntime fed ones, {name}: max abs err {err:.3g}")


def ort_session(path, threads=0):
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def compare(what, got, exp, rtol, atol):
    """Raises OracleFailure naming the worst element; returns the max abs error otherwise."""
    if got.dtype != exp.dtype or got.shape != exp.shape:
        raise OracleFailure(f"{what}: got {got.dtype}{list(got.shape)}, expected {exp.dtype}{list(exp.shape)}")
    if not np.issubdtype(exp.dtype, np.floating):
        bad = np.flatnonzero(got.ravel() != exp.ravel())
        if bad.size:
            i = bad[0]
            raise OracleFailure(f"{what}: {bad.size} elements differ, first at {np.unravel_index(i, exp.shape)}: "
                                f"got {got.ravel()[i]}, expected {exp.ravel()[i]}")
        return 0.0
    g, e = got.astype(np.float64).ravel(), exp.astype(np.float64).ravel()
    both_nan = np.isnan(g) & np.isnan(e)
    with np.errstate(invalid="ignore"):
        err = np.where(both_nan, 0.0, np.abs(g - e))
        err = np.where(np.isinf(e) & (g == e), 0.0, err)
        excess = np.where(np.isnan(err), np.inf, err - (atol + rtol * np.abs(e)))
    if e.size and excess.max() > 0:
        i = int(np.argmax(excess))
        n_bad = int((excess > 0).sum())
        raise OracleFailure(f"{what}: {n_bad} of {e.size} elements outside rtol {rtol} atol {atol}; worst at "
                            f"{np.unravel_index(i, exp.shape)}: got {g[i]:.9g}, expected {e[i]:.9g} "
                            f"(abs err {abs(g[i] - e[i]):.3g}, max |expected| {np.abs(e).max():.3g})")
    return float(err.max()) if e.size else 0.0


def scorch_outputs(args, model_path, feeds, names):
    in_dir = os.path.join(args.workdir, "inputs")
    out_dir = os.path.join(args.workdir, "scorch")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.scorch_run, "run", model_path, "--batch", args.batch, "--output-dir", out_dir]
    if args.seq:
        cmd += ["--seq", args.seq]
    for name, arr in feeds.items():
        path = os.path.join(in_dir, name.replace("/", "_") + ".npy")
        np.save(path, arr)
        cmd += ["--input", f"{name}={path}"]
    for name in names:  # stale files from an earlier run must not pass for this run's outputs
        for f in (name, name.replace("/", "_")):
            p = os.path.join(out_dir, f + ".npy")
            if os.path.exists(p):
                os.remove(p)
    run(cmd)
    outs = {}
    for name in names:
        for f in (name, name.replace("/", "_")):
            p = os.path.join(out_dir, f + ".npy")
            if os.path.exists(p):
                outs[name] = np.load(p)
                break
        else:
            raise OracleFailure(f"scorch-run wrote no {out_dir}/{name}.npy")
    return outs


def model_get(args):
    os.makedirs(args.workdir, exist_ok=True)
    if args.model:
        return args.model, None
    path = os.path.join(args.workdir, "model.onnx")
    if args.gen:
        run([args.scorch_run, "gen", *shlex.split(args.gen), "-o", path])
        return path, None
    ref_dir = os.path.join(args.workdir, "torch_ref")
    run([args.torch_python, os.path.join(HERE, "export_torch.py"), args.torch, path, "--reference", ref_dir])
    return path, ref_dir


def roundtrip_check(args, model_path, feeds):
    saved = os.path.join(args.workdir, "saved.onnx")
    for stale in (saved, saved + ".data"):
        if os.path.exists(stale):
            os.remove(stale)
    run([args.roundtrip, model_path, saved, str(args.external_threshold)])
    a = onnx.load(model_path)
    b = onnx.load(saved)
    ia = {i.name: numpy_helper.to_array(i) for i in a.graph.initializer}
    ib = {i.name: numpy_helper.to_array(i) for i in b.graph.initializer}
    if ia.keys() != ib.keys():
        raise OracleFailure(f"round trip: initializer names differ: {sorted(ia.keys() ^ ib.keys())[:5]}")
    for k in ia:
        if ia[k].dtype != ib[k].dtype or ia[k].shape != ib[k].shape or ia[k].tobytes() != ib[k].tobytes():
            raise OracleFailure(f"round trip: initializer {k} changed")
    # Everything but the initializers (nodes, inputs, opsets, metadata, doc strings) must be kept.
    a.graph.ClearField("initializer")
    b.graph.ClearField("initializer")
    if a.SerializeToString(deterministic=True) != b.SerializeToString(deterministic=True):
        for field in ("graph", "opset_import", "ir_version", "producer_name", "metadata_props", "doc_string"):
            if getattr(a, field) != getattr(b, field):
                raise OracleFailure(f"round trip: ModelProto.{field} changed")
        raise OracleFailure("round trip: the saved ModelProto differs outside its initializers")
    if args.external_threshold > 0:
        # onnx.load inlines external data (and resets data_location): look at the file as written.
        raw = onnx.load(saved, load_external_data=False)
        n_ext = sum(1 for i in raw.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL)
        if n_ext == 0:
            raise OracleFailure(f"round trip: no initializer went to external data at threshold {args.external_threshold}")
    ra = ort_session(model_path).run(None, feeds)
    rb = ort_session(saved).run(None, feeds)
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            raise OracleFailure(f"round trip: onnxruntime output {i} differs between the original and saved model")
    print(f"round trip: {len(ia)} initializers identical, onnxruntime outputs bit-identical")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scorch-run", required=True)
    ap.add_argument("--workdir", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model")
    src.add_argument("--gen")
    src.add_argument("--torch", choices=["resnet18_eval", "resnet18_train", "gpt2", "gpt2_cumsum", "swin_t", "einsum",
                                          "resize_cubic"])
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--int-high", type=int, default=2, help="bound for integer inputs not feeding a Gather")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--atol-of-max", type=float, default=0.0,
                    help="raise atol to this fraction of the output's max |value| (outputs far from 1, where "
                         "float32 spacing alone exceeds --atol)")
    ap.add_argument("--roundtrip", help="roundtrip binary: also check load + save")
    ap.add_argument("--external-threshold", type=int, default=0)
    args = ap.parse_args()

    try:
        model_path, ref_dir = model_get(args)
        sess = ort_session(model_path)
        names = [o.name for o in sess.get_outputs()]
        if ref_dir:
            # PyTorch's inputs, so its outputs are a second reference for onnxruntime itself.
            feeds = {m.name: np.load(os.path.join(ref_dir, m.name + ".npy")) for m in sess.get_inputs()}
        else:
            feeds = make_inputs(model_path, sess, args.batch, args.seq, args.seed, args.int_high)
        if args.roundtrip:
            roundtrip_check(args, model_path, feeds)
            return 0
        expected = dict(zip(names, sess.run(None, feeds)))
        if ref_dir:
            for name in names:
                p = os.path.join(ref_dir, name + ".npy")
                if os.path.exists(p):
                    err = compare(f"onnxruntime vs PyTorch, output {name}", expected[name], np.load(p),
                                  args.rtol, args.atol)
                    print(f"onnxruntime vs PyTorch {name}: max abs err {err:.3g}")
        got = scorch_outputs(args, model_path, feeds, names)
        for name in names:
            ref = expected[name]
            atol = args.atol
            if args.atol_of_max and ref.size and np.issubdtype(ref.dtype, np.floating):
                atol = max(atol, args.atol_of_max * float(np.nanmax(np.abs(ref))))
            err = compare(f"output {name}", got[name], ref, args.rtol, atol)
            print(f"scorch vs onnxruntime {name} {list(expected[name].shape)}: max abs err {err:.3g}")
        mask_left_out_check(args, model_path, sess, feeds, names)
    except OracleFailure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
