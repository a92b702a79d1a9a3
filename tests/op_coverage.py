#!/usr/bin/env python3
"""The backend-ops check (ggml's test-backend-ops habit): every op row of graph/ops.def and
graph/ops_train.def has everything an op needs, or a stated reason.

    python3 tests/op_coverage.py BUILD_DIR

For each op it checks
  - a shape function, a CPU kernel and a CUDA kernel: the row names one (`none` only for the ops in
    NO_FUNCTION, with the reason), and it is defined, in the object of a file named after the op's
    family: graph/shape_<family>*.c, backends/cpu/cpu_<family>*.c, backends/cuda/cu_<family>*.{c,cu},
    autodiff/grad_<family>*.c (a function several ops share may live in any of their families);
  - a gradient rule (defined likewise) unless the row says `none`, the op being not differentiable;
  - a CPU-vs-CUDA case in tests/cuda/test_cuda_ops.c for every op with a kernel;
  - a finite-difference case (a test_grad_*.c naming SC_OP_<ENUM>) for every differentiable op, and
    a bf16/f16 one (tests/test_grad_low.c) for every differentiable op whose precision rule is `low`;
  - an enabled ONNX conformance case (tests/conformance/cases.txt less skip.txt) whose model uses the
    op, for every op of ops.def, unless NO_CONFORMANCE gives the reason.
Definitions are read from the built objects (nm), so kernels made by macros count where they are made.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))

# Ops allowed a `none` shape function or kernel, and why.
NO_FUNCTION = {"CONSTANT": "the importer turns Constant nodes into constant values",
               "EINSUM": "graph_prepare lowers Einsum to Transpose, Reshape, ReduceSum and MatMul (graph/pass_einsum.c)"}
CONTROL = ("LOOP", "IF", "SEQUENCE_EMPTY", "SEQUENCE_CONSTRUCT", "SEQUENCE_INSERT", "SEQUENCE_AT", "SEQUENCE_ERASE",
           "SEQUENCE_LENGTH", "SPLIT_TO_SEQUENCE", "CONCAT_FROM_SEQUENCE")
for _op in CONTROL:
    NO_FUNCTION[_op] = "graph_infer_shapes lowers control flow and sequences to tensor ops (graph/pass_control.c)"
# Public ops without an enabled ONNX node test, and why.
NO_CONFORMANCE = {
    "CONSTANT": "the importer turns Constant nodes into constant values; its node tests run through them",
    "GLOBAL_AVERAGE_POOL": "ONNX's node tests use opset 1, below SC_MIN_OPSET (skip.txt); tests/test_cpu_nn.c "
                           "and the ResNet e2e tests against onnxruntime cover it",
    "NOT": "ONNX's node tests use opset 1, below SC_MIN_OPSET (skip.txt); tests/test_cpu_elementwise.c covers it",
    "AND": "ONNX's node tests use opset 7, below SC_MIN_OPSET (skip.txt); tests/test_cpu_elementwise.c covers it",
    **{op: "ONNX's node tests feed the trip count, condition or sequence at run time (or output a sequence); Scorch "
             "lowers only what is constant once dims are bound: tests/control_flow_check.py checks it against "
             "onnxruntime" for op in CONTROL},
    "TILE": "ONNX's node tests feed repeats at run time, a shape Scorch cannot plan (skip.txt); tests/test_cpu_movement.c "
            "checks numpy.tile's values with constant repeats",
}

STAGES = (  # column, symbol prefix, object folder under the build dir, file prefix
    ("shape", "shape_", "CMakeFiles/scorch.dir/graph", "shape_"),
    ("kernel", "cpu_", "CMakeFiles/scorch.dir/backends/cpu", "cpu_"),
    ("kernel", "cu_", "CMakeFiles/scorch_cuda.dir/backends/cuda", "cu_"),
    ("grad", "grad_", "CMakeFiles/scorch.dir/autodiff", "grad_"),
)
COLUMNS = ("enum", "name", "min_in", "max_in", "min_out", "max_out", "family", "attrs", "since", "shape",
           "kernel", "grad", "cost", "precision")
PRECISIONS = ("low", "fp32", "follow")


def op_rows():
    rows = []
    for name in ("ops.def", "ops_train.def"):
        text = open(os.path.join(ROOT, "graph", name)).read()
        for m in re.finditer(r"^SC_OP\((.*)\)\s*$", text, re.M):
            cols = [c.strip() for c in m.group(1).split(",")]
            if len(cols) != len(COLUMNS):
                sys.exit(f"graph/{name}: row {cols[0]} has {len(cols)} columns, want {len(COLUMNS)}")
            row = dict(zip(COLUMNS, cols))
            if row["precision"] not in PRECISIONS:
                sys.exit(f"graph/{name}: row {cols[0]}: precision {row['precision']} is not one of {PRECISIONS}")
            row["name"] = row["name"].strip('"')
            row["internal"] = name == "ops_train.def"
            rows.append(row)
    return rows


def defined_symbols(obj_dir, src_dir):
    """symbol -> basename of the source file whose object defines it (objects of files since renamed
    or removed are ignored)"""
    where = {}
    for obj in glob.glob(os.path.join(obj_dir, "*.o")):
        src = os.path.basename(obj)[: -len(".o")]
        if not os.path.exists(os.path.join(src_dir, src)):
            continue
        out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TtWw":
                where[parts[2]] = src
    return where


def check_functions(rows, build):
    fails = []
    for column, sym_prefix, obj_dir, file_prefix in STAGES:
        path = os.path.join(build, obj_dir)
        if not os.path.isdir(path):
            fails.append(f"no objects under {path}: build the scorch and scorch_cuda targets first")
            continue
        where = defined_symbols(path, os.path.join(ROOT, obj_dir.split(".dir/", 1)[1]))
        families = {}
        for r in rows:
            if r[column] != "none":
                families.setdefault(sym_prefix + r[column], set()).add(r["family"])
        for r in rows:
            fn = r[column]
            if fn == "none":
                if column != "grad" and r["enum"] not in NO_FUNCTION:
                    fails.append(f"{r['name']}: no {sym_prefix}* function ({column} column is none) and no reason")
                continue
            sym = sym_prefix + fn
            src = where.get(sym)
            if not src:
                fails.append(f"{r['name']}: {sym} is not defined in {obj_dir}")
            elif not any(src.startswith(f"{file_prefix}{fam}") for fam in families[sym]):
                want = " or ".join(f"{file_prefix}{fam}*" for fam in sorted(families[sym]))
                fails.append(f"{r['name']}: {sym} is defined in {src}, not in {want} (its family)")
    return fails


def check_test_cases(rows):
    fails = []
    cuda_cases = set(re.findall(r"\{SC_OP_(\w+),", open(os.path.join(ROOT, "tests/cuda/test_cuda_ops.c")).read()))
    fd_text = "".join(open(f).read() for f in glob.glob(os.path.join(ROOT, "tests/test_grad_*.c"))
                      if not f.endswith("test_grad_tables.c"))
    fd_ops = set(re.findall(r"SC_OP_(\w+)", fd_text))
    low_ops = set(re.findall(r"SC_OP_(\w+)", open(os.path.join(ROOT, "tests/test_grad_low.c")).read()))
    for r in rows:
        if r["precision"] == "low" and r["grad"] != "none" and r["enum"] not in low_ops:
            fails.append(f"{r['name']}: runs in low precision, but no bf16/f16 finite-difference case in "
                         "tests/test_grad_low.c")
        if r["kernel"] != "none" and r["enum"] not in cuda_cases:
            fails.append(f"{r['name']}: no CPU-vs-CUDA case in tests/cuda/test_cuda_ops.c")
        if r["grad"] != "none" and r["enum"] not in fd_ops:
            fails.append(f"{r['name']}: differentiable, but no finite-difference case in tests/test_grad_*.c")
    return fails


def check_conformance(rows):
    import onnx  # the pinned onnx of scripts/install.sh, as the conformance suite
    from list_cases import model_op_types, node_dir

    conf = os.path.join(ROOT, "tests", "conformance")
    cases = [l.strip() for l in open(os.path.join(conf, "cases.txt")) if l.strip() and not l.startswith("#")]
    skipped = {l.split(":")[0].strip() for l in open(os.path.join(conf, "skip.txt")) if ":" in l and not l.startswith("#")}
    covered = set()
    for case in cases:
        if case in skipped:
            continue
        model = onnx.load(os.path.join(node_dir(), case, "model.onnx"))
        covered |= {op for domain, op in model_op_types(model) if domain in ("", "ai.onnx")}
    fails = []
    for r in rows:
        if r["internal"] or r["name"] in covered or r["enum"] in NO_CONFORMANCE:
            continue
        fails.append(f"{r['name']}: no enabled ONNX conformance case (tests/conformance) and no reason")
    return fails


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = op_rows()
    fails = check_functions(rows, sys.argv[1]) + check_test_cases(rows) + check_conformance(rows)
    for f in fails:
        print("FAIL", f)
    print(f"{len(rows)} ops checked, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
