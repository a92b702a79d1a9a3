#!/usr/bin/env python3
"""Loop, If and the sequence ops (graph/pass_control.c) against onnxruntime, and through training.

    control_flow_check.py --scorch-run BIN --workdir DIR

Models are built with onnx.helper, with a symbolic batch dim (and feature dim F where a case binds
it with --dim), so every trip count, condition and position is known only once dims are bound:
  loop_scan    a Loop whose trip count is Shape(x)[1] - 1, carrying y = tanh(y W + i) with W
               captured from the outer graph, a condition computed in the body, and a scan output;
  nested       a Loop inside a Loop body, the inner one reading both iteration numbers;
  if_then /    an If on Shape(x)[1] > 3, run at F = 5 (then_branch) and F = 3 (else_branch), each
  if_else      branch reading the outer x;
  sequences    SplitToSequence (no split and keepdims 0, a scalar chunk, a list), SequenceInsert
               at the front, SequenceErase and SequenceAt at negative positions, SequenceConstruct,
               SequenceLength, ConcatFromSequence with and without new_axis (at the last axis).
Each output must match onnxruntime within 1e-5 + 1e-5 |ort|.

Refusals, each a non-zero exit naming the node: a trip count fed at run time, a loop whose
condition turns false before its trip count, an If on run-time data, and nested loops that would
unroll into more than 2^22 nodes (60000 x 60000 iterations).

Training: y = tanh(y W + b) three times in a Loop, MSE against labels, 2 SGD steps (lr 0.1, no
momentum): the trained W and b must match the same steps computed in float64 with numpy
(backpropagation through the unrolled iterations) within 1e-5 + 1e-4 |ref|.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17
FAILS = []


def const(name, value, dtype=np.int64):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(value, dtype=dtype), name))


def save(path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, os.path.basename(path), inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def x_input(name="x", f="F"):
    return h.make_tensor_value_info(name, T.FLOAT, ["B", f])


def out(name):
    return h.make_tensor_value_info(name, T.FLOAT, None)


def model_loop_scan(path, rng):
    w = nh.from_array(rng.standard_normal((4, 4)).astype(np.float32) * 0.5, "W")
    body = h.make_graph(
        [h.make_node("MatMul", ["y_in", "W"], ["yw"]),
         h.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
         h.make_node("Add", ["yw", "i_f"], ["pre"]),
         h.make_node("Tanh", ["pre"], ["y_out"]),
         const("limit", 100),
         h.make_node("Less", ["i", "limit"], ["cond_out"]),
         const("axes1", [1]),
         h.make_node("ReduceSum", ["y_out", "axes1"], ["scan"], keepdims=0)],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, None)],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("y_out", T.FLOAT, None),
         h.make_tensor_value_info("scan", T.FLOAT, None)])
    nodes = [h.make_node("Shape", ["x"], ["shape"]), const("one_idx", 1), const("one", 1),
             h.make_node("Gather", ["shape", "one_idx"], ["f"], axis=0),
             h.make_node("Sub", ["f", "one"], ["trips"]), const("true", True, np.bool_),
             h.make_node("Loop", ["trips", "true", "x"], ["y", "scans"], body=body)]
    return save(path, nodes, [x_input(f=4)], [out("y"), out("scans")], [w])


def model_nested(path):
    inner = h.make_graph(
        [h.make_node("Cast", ["j"], ["j_f"], to=T.FLOAT), h.make_node("Cast", ["i"], ["i_f2"], to=T.FLOAT),
         h.make_node("Mul", ["j_f", "i_f2"], ["ij"]), h.make_node("Add", ["acc_in", "ij"], ["acc_out"]),
         h.make_node("Identity", ["c2"], ["c2_out"])],
        "inner",
        [h.make_tensor_value_info("j", T.INT64, []), h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("acc_in", T.FLOAT, None)],
        [h.make_tensor_value_info("c2_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, None)])
    outer = h.make_graph(
        [const("three", 3), h.make_node("Loop", ["three", "", "y_in"], ["y_mid"], body=inner),
         h.make_node("Add", ["y_mid", "x"], ["y_out"]), h.make_node("Identity", ["c"], ["c_out"])],
        "outer",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, None)],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("y_out", T.FLOAT, None)])
    nodes = [const("two", 2), h.make_node("Loop", ["two", "", "x"], ["y"], body=outer)]
    return save(path, nodes, [x_input(f=4)], [out("y")])


def model_if(path):
    then = h.make_graph([const("k", 2.0, np.float32), h.make_node("Mul", ["x", "k"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("Shape", ["x"], ["shape"]), const("one_idx", 1), const("three", 3),
             h.make_node("Gather", ["shape", "one_idx"], ["f"], axis=0),
             h.make_node("Greater", ["f", "three"], ["wide"]),
             h.make_node("If", ["wide"], ["r"], then_branch=then, else_branch=other),
             h.make_node("Relu", ["r"], ["y"])]
    return save(path, nodes, [x_input()], [out("y")])


def model_sequences(path):
    nodes = [h.make_node("SplitToSequence", ["x"], ["cols"], axis=1, keepdims=0),  # F tensors [B]
             h.make_node("SequenceErase", ["cols", "minus1"], ["cols2"]),
             const("minus1", -1), const("zero", 0), const("minus2", -2), const("two", 2), const("sizes", [1, 3]),
             h.make_node("Neg", ["first"], ["neg_first"]),
             h.make_node("SequenceAt", ["cols", "zero"], ["first"]),
             h.make_node("SequenceInsert", ["cols2", "neg_first", "zero"], ["cols3"]),
             h.make_node("SequenceAt", ["cols3", "minus2"], ["at"]),
             h.make_node("SequenceLength", ["cols3"], ["len"]),
             h.make_node("Cast", ["len"], ["len_f"], to=T.FLOAT),
             h.make_node("ConcatFromSequence", ["cols3"], ["stacked"], axis=-1, new_axis=1),  # [B, F]
             h.make_node("Unsqueeze", ["at", "minus1"], ["at2"]),
             h.make_node("Add", ["stacked", "at2"], ["s1"]),
             h.make_node("Add", ["s1", "len_f"], ["y1"]),
             h.make_node("SplitToSequence", ["x", "two"], ["chunks"], axis=1),  # [B,2],[B,2]
             h.make_node("ConcatFromSequence", ["chunks"], ["back"], axis=1),
             h.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
             h.make_node("SequenceAt", ["parts", "minus1"], ["last3"]),
             h.make_node("SequenceConstruct", ["last3", "back"], ["pair"]),
             h.make_node("ConcatFromSequence", ["pair"], ["y2"], axis=1)]
    nodes.sort(key=lambda n: 0 if n.op_type == "Constant" else 1)
    order = ["cols", "first", "neg_first", "cols2", "cols3"]  # topological for the checker
    nodes = ([n for n in nodes if n.op_type == "Constant"] +
             [next(n for n in nodes if n.output[0] == o) for o in order] +
             [n for n in nodes if n.op_type != "Constant" and n.output[0] not in order])
    return save(path, nodes, [x_input(f=4)], [out("y1"), out("y2")])


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        FAILS.append(f"{' '.join(cmd[:3])}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r


def check_run(args, work, name, path, x, extra=()):
    np.save(os.path.join(work, name + "_x.npy"), x)
    odir = os.path.join(work, name + "_out")
    r = run([args.scorch_run, "run", path, "--batch", str(x.shape[0]), "--input", f"x={work}/{name}_x.npy",
             "--output-dir", odir] + list(extra))
    if r.returncode:
        return
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for o, ref in zip(sess.get_outputs(), sess.run(None, {"x": x})):
        got = np.load(os.path.join(odir, o.name + ".npy"))
        err = np.abs(got - ref) - (1e-5 + 1e-5 * np.abs(ref)) if got.shape == ref.shape else None
        if err is None or (err > 0).any():
            FAILS.append(f"{name}: output {o.name} {got.shape} differs from onnxruntime {ref.shape}"
                         + ("" if err is None else f" (worst excess {err.max():.3g})"))
        else:
            print(f"ok {name}: {o.name} {list(ref.shape)} max abs err {np.abs(got - ref).max():.2g}")


def check_refused(args, work, name, path, x, want, extra=()):
    np.save(os.path.join(work, name + "_x.npy"), x)
    r = run([args.scorch_run, "run", path, "--batch", str(x.shape[0]), "--input", f"x={work}/{name}_x.npy",
             "--output-dir", os.path.join(work, name + "_out")] + list(extra), expect_ok=False)
    if r.returncode == 0 or any(w not in r.stderr for w in want):
        FAILS.append(f"{name}: want a refusal naming {want}, got exit {r.returncode}: {r.stderr.strip()[-300:]}")
    else:
        print(f"ok {name}: refused: {r.stderr.strip().splitlines()[-1]}")


def refusals(args, work, x):
    runtime_m = h.make_graph([h.make_node("Neg", ["y_in"], ["y_out"]), h.make_node("Identity", ["c"], ["c_out"])],
                             "b", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                                   h.make_tensor_value_info("y_in", T.FLOAT, None)],
                             [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("y_out", T.FLOAT, None)])
    p = save(os.path.join(work, "runtime_trips.onnx"),
             [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Cast", ["s"], ["m"], to=T.INT64),
              h.make_node("Loop", ["m", "", "x"], ["y"], body=runtime_m, name="data_loop")], [x_input(f=4)], [out("y")])
    check_refused(args, work, "runtime_trips", p, x, ["data_loop", "trip count", "run-time"])
    early = h.make_graph([h.make_node("Neg", ["y_in"], ["y_out"]), const("lim", 1),
                          h.make_node("Less", ["i", "lim"], ["c_out"])],
                         "b", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                               h.make_tensor_value_info("y_in", T.FLOAT, None)],
                         [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("y_out", T.FLOAT, None)])
    p = save(os.path.join(work, "early_exit.onnx"),
             [const("four", 4), h.make_node("Loop", ["four", "", "x"], ["y"], body=early, name="short_loop")],
             [x_input(f=4)], [out("y")])
    check_refused(args, work, "early_exit", p, x, ["short_loop", "iteration 1", "early"])
    br = h.make_graph([h.make_node("Neg", ["x"], ["n"])], "t", [], [h.make_tensor_value_info("n", T.FLOAT, None)])
    p = save(os.path.join(work, "data_if.onnx"),
             [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), const("z", 0.0, np.float32),
              h.make_node("Greater", ["s", "z"], ["pos"]),
              h.make_node("If", ["pos"], ["y"], then_branch=br, else_branch=br, name="data_if")], [x_input(f=4)], [out("y")])
    check_refused(args, work, "data_if", p, x, ["data_if", "run-time"])
    inner = h.make_graph([h.make_node("Neg", ["y_in"], ["y_out"]), h.make_node("Identity", ["c"], ["c_out"])], "inner",
                         runtime_m.input, runtime_m.output)
    mid = h.make_graph([const("m2", 60000), h.make_node("Loop", ["m2", "", "y_in"], ["y_out"], body=inner),
                        h.make_node("Identity", ["c"], ["c_out"])], "mid", runtime_m.input, runtime_m.output)
    p = save(os.path.join(work, "unroll_limit.onnx"),
             [const("m1", 60000), h.make_node("Loop", ["m1", "", "x"], ["y"], body=mid, name="outer")],
             [x_input(f=4)], [out("y")])
    check_refused(args, work, "unroll_limit", p, x, ["outer/", "more than Scorch unrolls"])


def train_check(args, work, rng):
    """Backpropagation through an unrolled Loop against numpy in float64."""
    B, D, STEPS, LR, TRIPS = 3, 4, 2, 0.1, 3
    w0 = (rng.standard_normal((D, D)) * 0.5).astype(np.float32)
    b0 = (rng.standard_normal(D) * 0.1).astype(np.float32)
    x = rng.standard_normal((B, D)).astype(np.float32)
    t = rng.standard_normal((B, D)).astype(np.float32)
    body = h.make_graph([h.make_node("MatMul", ["y_in", "W"], ["yw"]), h.make_node("Add", ["yw", "b"], ["pre"]),
                         h.make_node("Tanh", ["pre"], ["y_out"]), h.make_node("Identity", ["c"], ["c_out"])],
                        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                                 h.make_tensor_value_info("y_in", T.FLOAT, None)],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("y_out", T.FLOAT, None)])
    p = save(os.path.join(work, "train_loop.onnx"),
             [const("trips", TRIPS), h.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
             [h.make_tensor_value_info("x", T.FLOAT, ["B", D])], [out("y")],
             [nh.from_array(w0, "W"), nh.from_array(b0, "b")])
    np.save(os.path.join(work, "tx.npy"), x)
    np.save(os.path.join(work, "ty.npy"), t)
    trained = os.path.join(work, "train_loop_trained.onnx")
    r = run([args.scorch_run, "train", p, "-o", trained, "--batch", str(B), "--steps", str(STEPS), "--lr", str(LR),
             "--momentum", "0", "--loss", "mse", "--data", os.path.join(work, "tx.npy"),
             "--labels", os.path.join(work, "ty.npy")])
    if r.returncode:
        return
    w, b = w0.astype(np.float64), b0.astype(np.float64)
    for _ in range(STEPS):
        ys = [x.astype(np.float64)]
        for _ in range(TRIPS):
            ys.append(np.tanh(ys[-1] @ w + b))
        g = 2 * (ys[-1] - t) / ys[-1].size
        gw, gb = np.zeros_like(w), np.zeros_like(b)
        for k in range(TRIPS, 0, -1):
            gpre = g * (1 - ys[k] ** 2)
            gw += ys[k - 1].T @ gpre
            gb += gpre.sum(0)
            g = gpre @ w.T
        w, b = w - LR * gw, b - LR * gb
    got = {i.name: nh.to_array(i) for i in onnx.load(trained).graph.initializer}
    for name, ref, start in (("W", w, w0), ("b", b, b0)):
        err = np.abs(got[name] - ref) - (1e-5 + 1e-4 * np.abs(ref))
        moved = np.abs(ref - start).max()
        if (err > 0).any() or moved < 1e-3:
            FAILS.append(f"train_loop: {name} differs from numpy float64 (worst excess {err.max():.3g}, moved {moved:.3g})")
        else:
            print(f"ok train_loop: {name} within tolerance of numpy float64 after {STEPS} steps "
                  f"(max abs err {np.abs(got[name] - ref).max():.2g}, update {moved:.3g})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scorch-run", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    x4 = rng.standard_normal((2, 4)).astype(np.float32)
    check_run(args, work, "loop_scan", model_loop_scan(os.path.join(work, "loop_scan.onnx"), rng), x4)
    check_run(args, work, "nested", model_nested(os.path.join(work, "nested.onnx")), x4)
    p = model_if(os.path.join(work, "if.onnx"))
    check_run(args, work, "if_then", p, rng.standard_normal((2, 5)).astype(np.float32), ["--dim", "F=5"])
    check_run(args, work, "if_else", p, rng.standard_normal((2, 3)).astype(np.float32), ["--dim", "F=3"])
    check_run(args, work, "sequences", model_sequences(os.path.join(work, "sequences.onnx")), x4)
    refusals(args, work, x4)
    train_check(args, work, rng)
    for f in FAILS:
        print("FAIL", f)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
