#!/usr/bin/env python3
"""Checks a model written by `scorch-run gen` (registered by tests/gen.cmake).

usage: gen_check.py SCORCH_RUN NAME [--expect D0,D1,...] [--scorch] -- GEN_ARGS...

1. runs `SCORCH_RUN gen GEN_ARGS -o NAME.onnx` twice and requires identical bytes (the seed fixes
   every weight) and a different file for another --seed;
2. onnx.checker.check_model(full_check=True) (strict shape inference included);
3. runs it in onnxruntime with batch 2 (and seq 7 for token inputs), requires the output shape
   --expect (symbolic 'batch' -> 2, 'seq' -> 7) and finite values;
4. with --scorch, also runs `SCORCH_RUN run` on the same inputs and compares with onnxruntime.

usage: gen_check.py SCORCH_RUN --cli   checks exit codes and messages of malformed command lines.
Fails through the exit code.
"""
import os
import subprocess
import sys

import numpy as np


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def sh(cmd, expect_rc=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect_rc})\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def gen(exe, path, args, seed=None):
    extra = ["--seed", str(seed)] if seed is not None else []
    sh([exe, "gen"] + args + extra + ["-o", path])


def check_determinism(exe, name, args):
    # Same file name in other folders: the external data location (a bare file name) is part of the model.
    for d in ("again", "seed7"):
        os.makedirs(d, exist_ok=True)
    gen(exe, os.path.join("again", name + ".onnx"), args)
    gen(exe, os.path.join("seed7", name + ".onnx"), args, seed=7)
    for suffix in (".onnx", ".onnx.data"):
        if not os.path.exists(name + suffix):
            continue
        if read(name + suffix) != read(os.path.join("again", name + suffix)):
            fail(f"two runs with the same seed wrote different {name + suffix}")
    last = ".onnx.data" if os.path.exists(name + ".onnx.data") else ".onnx"
    if read(name + last) == read(os.path.join("seed7", name + last)):
        fail(f"--seed 7 wrote the same {name + last}")


def make_inputs(sess):
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [2 if d == "batch" else 7 if isinstance(d, str) else d for d in i.shape]
        if "int64" in i.type:
            feeds[i.name] = rng.integers(0, 50, size=shape, dtype=np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def compare_scorch(exe, name, sess, feeds, ref):
    os.makedirs(name + "_out", exist_ok=True)
    cmd = [exe, "run", name + ".onnx", "--batch", "2", "--output-dir", name + "_out"]
    for k, v in feeds.items():
        np.save(f"{name}_in_{k}.npy", v)
        cmd += ["--input", f"{k}={name}_in_{k}.npy"]
        if v.dtype == np.int64:
            cmd += ["--seq", str(v.shape[1])]
    print(sh(cmd).stdout, end="")
    for o, r in zip(sess.get_outputs(), ref):
        got = np.load(os.path.join(name + "_out", o.name + ".npy"))
        if got.shape != r.shape:
            fail(f"scorch output {o.name} shape {got.shape} != onnxruntime {r.shape}")
        err = np.abs(got - r).max()
        tol = 1e-4 * max(1.0, float(np.abs(r).max()))
        print(f"scorch vs onnxruntime {o.name}: max abs diff {err:.3g} (tol {tol:.3g})")
        if not err <= tol:
            fail(f"scorch output {o.name} differs from onnxruntime by {err}")


def check_model(exe, name, expect, scorch, args):
    import onnx
    import onnxruntime as ort

    gen(exe, name + ".onnx", args)
    check_determinism(exe, name, args)
    onnx.checker.check_model(name + ".onnx", full_check=True)
    model = onnx.load(name + ".onnx", load_external_data=False)
    external = [t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    want_external = "--external" in args or "--inline-limit" in args
    if want_external != bool(external):
        fail(f"external initializers: {len(external)}, expected {'some' if want_external else 'none'}")
    if "--inline-limit" in args:  # switched midway: big tensors before and after the switch all went out
        inline_big = [t.name for t in model.graph.initializer
                      if t.data_location != onnx.TensorProto.EXTERNAL and len(t.raw_data) >= 1024]
        if inline_big:
            fail(f"initializers left inline after the switch to external data: {inline_big}")
    if model.opset_import[0].version != 17 or model.ir_version != 8 or model.producer_name != "scorch":
        fail("expected opset 17, ir_version 8, producer scorch")
    sess = ort.InferenceSession(name + ".onnx", providers=["CPUExecutionProvider"])
    feeds = make_inputs(sess)
    out = sess.run(None, feeds)
    if expect is not None and tuple(out[0].shape) != expect:
        fail(f"output shape {out[0].shape}, expected {expect}")
    if not all(np.isfinite(o).all() for o in out):
        fail("non-finite output")
    print(f"{name}: ok, output {out[0].shape}, mean {out[0].mean():.4g} std {out[0].std():.4g}")
    if scorch:
        compare_scorch(exe, name, sess, feeds, out)


def check_cli(exe):
    cases = [
        ([], 2, "usage"),
        (["nope"], 2, "unknown command"),
        (["gen", "resnet", "-o", "x.onnx"], 2, "--depth is required"),
        (["gen", "resnet", "--depth", "18"], 2, "-o FILE.onnx is required"),
        (["gen", "resnet", "--depth", "x1", "-o", "x.onnx"], 2, "not an integer"),
        (["gen", "resnet", "--depth", "0", "-o", "x.onnx"], 1, "at least 1"),
        (["gen", "resnet", "--bogus", "-o", "x.onnx"], 2, "unknown option"),
        (["gen", "dranet", "--image", "60", "-o", "x.onnx"], 1, "multiple of 8"),
        (["gen", "gpt", "--preset", "huge", "-o", "x.onnx"], 2, "unknown preset"),
        (["gen", "gpt", "--layers", "1", "--heads", "3", "--dim", "64", "-o", "x.onnx"], 1, "not a multiple"),
        (["gen", "resnet", "--depth", "7", "-o", "no/such/dir/x.onnx"], 1, "no/such/dir"),
        (["info", "missing.onnx"], 1, "missing.onnx"),
        (["run"], 2, "missing argument"),
    ]
    for args, rc, text in cases:
        p = sh([exe] + args, expect_rc=rc)
        if text not in p.stderr:
            fail(f"{args}: stderr lacks '{text}': {p.stderr}")
        if rc == 1 and not p.stderr.startswith("scorch-run: "):
            fail(f"{args}: error not prefixed with 'scorch-run: ': {p.stderr}")
    for cmd in (["--help"], ["gen", "--help"], ["gen", "resnet", "--help"], ["gen", "dranet", "--help"],
                ["gen", "gpt", "--help"], ["info", "--help"], ["run", "--help"]):
        if "usage" not in sh([exe] + cmd).stdout:
            fail(f"{cmd} printed no usage")
    print("cli: ok")


def main():
    argv = sys.argv[1:]
    exe = os.path.abspath(argv[0])
    if argv[1] == "--cli":
        return check_cli(exe)
    name, rest = argv[1], argv[2:]
    sep = rest.index("--")
    opts, args = rest[:sep], rest[sep + 1:]
    expect = None
    if "--expect" in opts:
        expect = tuple(int(d) for d in opts[opts.index("--expect") + 1].split(","))
    check_model(exe, name, expect, "--scorch" in opts, args)


if __name__ == "__main__":
    main()
