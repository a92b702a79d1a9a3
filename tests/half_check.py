#!/usr/bin/env python3
"""16-bit floats through `scorch-run run` against numpy (registered by tests/half.cmake).

usage: half_check.py SCORCH_RUN WORKDIR

One ONNX model takes every f16 bit pattern (h: 0..65535, and g: a fixed permutation of them) plus
float32 and float64 values chosen where rounding to f16 is hard (every half, the midpoints between
neighbouring halves and one ulp either side, subnormals, overflow edges, random values), and
outputs Cast in both directions, the element-wise ops on f16 and bf16 (same-shape and broadcast
scalar rows) and Clip. Each output is compared with numpy:
- conversions and +, -, *, /: bit for bit (numpy rounds float16 arithmetic correctly);
- NaN results: NaN; a Cast's NaN is quiet with the input's sign and top payload bits (core/half.h);
- Max, Min, Clip: the same value (numpy and ONNX differ only on which zero Max(+0, -0) returns);
- bf16, which numpy lacks: a reference rounding written here on the float32 bits.
Run by the Release build (F16C conversions) and by the portability stage's x86-64-v2 build (the
scalar fallback), so the two paths are each held to numpy. Fails through the exit code.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

N = 65536


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def halves():
    h = np.arange(N, dtype=np.uint32).astype(np.uint16).view(np.float16)
    g = np.random.default_rng(7).permutation(N).astype(np.uint16).view(np.float16)
    return h, g


def hard_floats(rng):
    """float32 values: every half, midpoints between neighbours and one float ulp either side."""
    h = np.arange(N, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    fin = np.sort(h[np.isfinite(h)])
    mid = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)  # exact in float32
    up = np.nextafter(mid, np.float32(np.inf))
    down = np.nextafter(mid, np.float32(-np.inf))
    edges = np.array([65504, 65519.99, 65520, 65536, 1e30, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001,
                      2.0**-26, 1e-30, 2.0**-14, 2.0**-14 - 2.0**-25, np.inf, -np.inf, np.nan], np.float32)
    rnd = (rng.standard_normal(200000) * np.exp2(rng.integers(-30, 20, 200000))).astype(np.float32)
    bits = rng.integers(0, 2**32, 50000, dtype=np.uint64).astype(np.uint32).view(np.float32)  # any pattern
    return np.concatenate([h, mid, up, down, edges, -edges, rnd, bits])


def hard_doubles(rng):
    """float64 values where rounding through float32 first would round twice."""
    h = np.arange(N, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    fin = np.sort(h[np.isfinite(h)])
    mid = (fin[:-1] + fin[1:]) / 2
    up, down = np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)
    up30 = mid + np.abs(mid) * 2.0**-40  # inside float32's rounding of the midpoint: the trap
    rnd = rng.standard_normal(100000) * np.exp2(rng.integers(-30, 20, 100000))
    return np.concatenate([h, mid, up, down, up30, -up30, rnd, [np.inf, -np.inf, np.nan, 65520.0, 65519.999]])


def bf16_round(x32):
    """float32 -> bf16 bits, nearest even; NaN quiet (reference written apart from core/half.h)."""
    u = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    r = np.where(nan, (u >> 16) | 0x40, r)
    return r.astype(np.uint16)


def bf16_widen(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def build_model(path, n_f, n_d, n_i):
    F16, F32, F64, BF16, I32, BOOL = (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE,
                                      TensorProto.BFLOAT16, TensorProto.INT32, TensorProto.BOOL)
    nodes, outs = [], []

    def node(op, ins, out, dtype, shape, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        if dtype is not None:
            outs.append(helper.make_tensor_value_info(out, dtype, shape))

    def const(name, dtype, vals):
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=helper.make_tensor(name, dtype, [], vals)))

    node("Cast", ["h"], "h_f32", F32, [N], to=F32)
    node("Cast", ["h"], "h_f64", F64, [N], to=F64)
    node("Cast", ["h"], "h_i32", I32, [N], to=I32)
    node("Cast", ["h"], "h_bool", BOOL, [N], to=BOOL)
    node("Cast", ["f"], "f_f16", F16, [n_f], to=F16)
    node("Cast", ["d"], "d_f16", F16, [n_d], to=F16)
    node("Cast", ["i"], "i_f16", F16, [n_i], to=F16)
    for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        node(op, ["h", "g"], op.lower(), F16, [N])
    for op in ("Equal", "Less", "Greater"):
        node(op, ["h", "g"], op.lower(), BOOL, [N])
    const("c", F16, [0.1])
    node("Add", ["h", "c"], "add_scalar", F16, [N])
    node("Div", ["c", "g"], "scalar_div", F16, [N])
    const("lo", F16, [-2.5])
    const("hi", F16, [1000])
    node("Clip", ["h", "lo", "hi"], "clip", F16, [N])
    # bf16: from the float32 inputs (the first N are every half, the next N a shuffle of float32s)
    node("Cast", ["f"], "f_bf16_raw", None, None, to=BF16)
    node("Cast", ["f_bf16_raw"], "f_bf16", F32, [n_f], to=F32)
    node("Slice", ["f_bf16_raw", "s0", "s1"], "bx", None, None)
    node("Slice", ["f_bf16_raw", "s1", "s2"], "by", None, None)
    nodes.insert(0, helper.make_node("Constant", [], ["s0"], name="s0", value=helper.make_tensor("s0", TensorProto.INT64, [1], [0])))
    nodes.insert(0, helper.make_node("Constant", [], ["s1"], name="s1", value=helper.make_tensor("s1", TensorProto.INT64, [1], [N])))
    nodes.insert(0, helper.make_node("Constant", [], ["s2"], name="s2", value=helper.make_tensor("s2", TensorProto.INT64, [1], [2 * N])))
    for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        node(op, ["bx", "by"], "bf_" + op.lower() + "_raw", None, None)
        node("Cast", ["bf_" + op.lower() + "_raw"], "bf_" + op.lower(), F32, [N], to=F32)
    node("Less", ["bx", "by"], "bf_less", BOOL, [N])
    ins = [helper.make_tensor_value_info("h", F16, [N]), helper.make_tensor_value_info("g", F16, [N]),
           helper.make_tensor_value_info("f", F32, [n_f]), helper.make_tensor_value_info("d", F64, [n_d]),
           helper.make_tensor_value_info("i", I32, [n_i])]
    graph = helper.make_graph(nodes, "half_check", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def same_bits(name, got, want):
    """Bit equality, except that a NaN needs only be a NaN: which operand's payload and sign a
    NaN + NaN carries is the compiler's choice (numpy's and GCC's differ); Cast's NaN rule is
    checked exactly below."""
    gb, wb = got.view(np.uint16 if got.itemsize == 2 else np.uint32 if got.itemsize == 4 else np.uint64), \
        want.view(np.uint16 if want.itemsize == 2 else np.uint32 if want.itemsize == 4 else np.uint64)
    gn, wn = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    bad = ~((gb == wb) | (gn & wn))
    if bad.any():
        k = np.flatnonzero(bad)[:5]
        fail(f"{name}: {bad.sum()} of {bad.size} differ from numpy, e.g. at {k.tolist()}: "
             f"got {gb[k].tolist()} want {wb[k].tolist()}")
    print(f"ok {name}: {got.size} values bit-identical to numpy")


def same_values(name, got, want):
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        k = np.flatnonzero(bad)[:5]
        fail(f"{name}: {bad.sum()} values differ, e.g. at {k.tolist()}: got {g[k].tolist()} want {w[k].tolist()}")
    print(f"ok {name}: {got.size} values equal to numpy's")


def quiet_nan_f16_to_f32(h):
    """core/half.h's rule for NaN inputs: quiet bit set, 10 payload bits kept, sign kept."""
    u = h.view(np.uint16).astype(np.uint32)
    return ((u & 0x8000) << 16) | 0x7FC00000 | ((u & 0x3FF) << 13)


def main():
    scorch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(1)
    h, g = halves()
    f, d = hard_floats(rng), hard_doubles(rng)
    i = np.concatenate([np.arange(-70000, 70001, dtype=np.int32), rng.integers(-2**31, 2**31, 10000, dtype=np.int64).astype(np.int32)])
    model = os.path.join(work, "half.onnx")
    build_model(model, f.size, d.size, i.size)
    feeds = {"h": h, "g": g, "f": f, "d": d, "i": i}
    args = [scorch, "run", model, "--output-dir", os.path.join(work, "out")]
    for k, v in feeds.items():
        p = os.path.join(work, k + ".npy")
        np.save(p, v)
        args += ["--input", f"{k}={p}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"scorch-run run failed ({r.returncode}): {r.stderr.strip()}")
    out = lambda name: np.load(os.path.join(work, "out", name + ".npy"))

    with np.errstate(all="ignore"):
        hn = np.isnan(h)
        same_bits("Cast f16->f32", out("h_f32"), h.astype(np.float32))
        nan_bits = out("h_f32").view(np.uint32)[hn]
        if not (nan_bits == quiet_nan_f16_to_f32(h[hn])).all():
            fail("Cast f16->f32: a NaN is not quiet with its payload and sign kept")
        same_bits("Cast f16->f64", out("h_f64"), h.astype(np.float64))
        fin = np.isfinite(h)
        same_values("Cast f16->i32 (finite)", out("h_i32")[fin], h[fin].astype(np.int32))
        same_values("Cast f16->bool", out("h_bool"), h != 0)
        same_bits("Cast f32->f16", out("f_f16"), f.astype(np.float16))
        fn = np.isnan(f)
        want_nan = (((f.view(np.uint32) >> 16) & 0x8000) | 0x7E00 | ((f.view(np.uint32) >> 13) & 0x3FF)).astype(np.uint16)
        if not (out("f_f16").view(np.uint16)[fn] == want_nan[fn]).all():
            fail("Cast f32->f16: a NaN is not quiet with its top payload bits and sign kept")
        same_bits("Cast f64->f16 (rounded once)", out("d_f16"), d.astype(np.float16))
        same_bits("Cast i32->f16", out("i_f16"), i.astype(np.float16))
        same_bits("Add f16", out("add"), h + g)
        same_bits("Sub f16", out("sub"), h - g)
        same_bits("Mul f16", out("mul"), h * g)
        same_bits("Div f16", out("div"), h / g)
        same_values("Max f16", out("max"), np.maximum(h, g))
        same_values("Min f16", out("min"), np.minimum(h, g))
        same_values("Equal f16", out("equal"), h == g)
        same_values("Less f16", out("less"), h < g)
        same_values("Greater f16", out("greater"), h > g)
        same_bits("Add f16 + broadcast scalar", out("add_scalar"), h + np.float16(0.1))
        same_bits("Div broadcast scalar / f16", out("scalar_div"), np.float16(0.1) / g)
        same_values("Clip f16", out("clip"), np.where(hn, h, np.clip(h, np.float16(-2.5), np.float16(1000))))

        fb = bf16_round(f)
        same_bits("Cast f32->bf16->f32", out("f_bf16"), bf16_widen(fb))
        bx, by = bf16_widen(fb[:N]), bf16_widen(fb[N:2 * N])
        for op, fnc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
            same_bits(f"{op.capitalize()} bf16", out("bf_" + op), bf16_widen(bf16_round(fnc(bx, by))))
        same_values("Max bf16", out("bf_max"), np.maximum(bx, by))
        same_values("Min bf16", out("bf_min"), np.minimum(bx, by))
        same_values("Less bf16", out("bf_less"), bx < by)
    print("half_check: all passed")


if __name__ == "__main__":
    main()
