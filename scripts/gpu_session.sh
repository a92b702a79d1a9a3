#!/usr/bin/env bash
# One GPU session on the lent device machine, in stages that each fit its 10-minute call limit:
#
#   scripts/gpu_session.sh [env] [build] [test] [sanitize] [bench] [tradeoff] | all | quick
#
# quick: the whole session in one call of about 7 minutes, for a lend of 15 minutes of device time
# (machine start included): env, build from the prebuilt binaries (native only if they do not run),
# a trimmed test (test_cuda_ops, ResNet on the GPU against the CPU, a capped streaming GPT against
# the plain GPU run, test_plan_offload --cuda) and the bench (150 s budget) on ResNet-50, the
# streaming GPT-2 medium and GPT-2 small in fp32 and bf16 with TF32 on: each open issue's GPU line
# in one table (speed against PyTorch and autocast, streaming throughput and link use, predicted
# step time). Call it with timeout_s 540: a stage cut off still leaves its log in $OUT.
#
# Needs devlib/ (scripts/gpu_pack.sh, run here first; name it in the call's carry). Every stage
# writes $OUT/<stage>.log (OUT: the device tool's output folder; out/gpu/ when unset) and prints
# "== stage S: ok|FAILED|SKIPPED (N s)"; the exit code is non-zero when a stage failed. Stages after
# `env` call `build` first when its binaries are missing (a fresh machine keeps nothing), so each
# call may name any stages. Without a GPU (this project's CI and dev machines) test, sanitize and
# bench say SKIPPED after running what needs no GPU; build still builds.
#
#   env       nvidia-smi, nvcc, python/torch, where cuDNN and cuBLAS are (pip's nvidia/* and
#             /usr/local/cuda): sets LD_LIBRARY_PATH for the other stages
#   build     native build on the device with devroot's headers and libraries (-march=native, the
#             device's cuDNN header); if that fails, or with SCORCH_GPU_PREBUILT=1, the x86-64-v3
#             binaries prebuilt by gpu_pack.sh
#   test      tests/cuda/test_cuda_ops (every kernel against the CPU backend, plan training on both),
#             then scorch-run train on small ResNet / GPT / DRANet models: the first step's gradients
#             and 4 steps of losses on --device cuda against --device cpu, and a checkpointed,
#             checkpointed, weight-streaming CUDA run against the plain one (SCORCH_GPU_SIMULATE=1
#             runs these comparisons on the CPU alone, to check this script without a GPU)
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on test_cuda_ops, each time-bounded
#             (SCORCH_SANITIZE_TIMEOUT seconds, default 150)
#   test      ... then test_plan_offload --cuda and tests/train_cuda_check.py (plans bit-identical
#             to none on the GPU, 10 steps against the CPU)
#   bench     bench/train_vs_torch_gpu.py: training step time against PyTorch on the same GPU
#             (SCORCH_BENCH_ARGS passes options, e.g. "--models resnet50 --steps 10")
#   tradeoff  scorch-run bench --device cuda: the ResNet-50 and GPT-2 small trade-off tables on the
#             GPU (CSV and SVG in $OUT)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/out/gpu}
BUILD=${SCORCH_GPU_BUILD:-$ROOT/build-gpu}
DEVROOT=${SCORCH_DEVROOT:-/tmp/scorch-devroot}
PACK=$ROOT/devlib/devroot.tar.xz
PY=${PYTHON:-python3}
mkdir -p "$OUT"
declare -a SUMMARY=()
FAILED=0
ENV_DONE=0

say() { echo "[gpu_session $(date +%H:%M:%S)] $*"; }
has_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

# ---- env ----
nvidia_lib_dirs() {
  local site
  site=$("$PY" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null) || return 0
  find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u
}

devroot_unpack() {
  [ -f "$PACK" ] || { say "no $PACK: run scripts/gpu_pack.sh here and carry devlib"; return 1; }
  local sum
  sum=$(sha256sum "$PACK" | cut -c1-16)
  if [ "$(cat "$DEVROOT/.stamp" 2>/dev/null)" != "$sum" ]; then
    rm -rf "$DEVROOT" && mkdir -p "$(dirname "$DEVROOT")"
    xz -dc "$PACK" | tar -C "$(dirname "$DEVROOT")" -xf - || return 1
    [ "$(basename "$DEVROOT")" = devroot ] || mv "$(dirname "$DEVROOT")/devroot" "$DEVROOT"
    echo "$sum" >"$DEVROOT/.stamp"
  fi
  # Only the carried libraries the system lacks go on the path (a newer system libgomp wins).
  rm -rf "$DEVROOT/lib-missing" && mkdir -p "$DEVROOT/lib-missing"
  local f so
  for f in "$DEVROOT"/lib/*.so.*; do
    so=$(basename "$f")
    if ! ldconfig -p 2>/dev/null | grep -q "^[[:space:]]$so "; then ln -sf "$f" "$DEVROOT/lib-missing/$so"; fi
  done
}

setup_env() {
  [ "$ENV_DONE" = 1 ] && return 0
  export PATH=/usr/local/cuda/bin:$PATH
  devroot_unpack || return 1
  local lp="$DEVROOT/lib-missing" d
  while read -r d; do [ -n "$d" ] && lp="$lp:$d"; done < <(nvidia_lib_dirs)
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && lp="$lp:$d"; done
  export LD_LIBRARY_PATH="$lp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONUNBUFFERED=1
  ENV_DONE=1
}

stage_env() {
  setup_env || return 1
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host $(uname -n); $(uname -srm)"
  echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'), $(nproc) logical CPUs"
  if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 | head -20; else echo "nvidia-smi: not available"; fi
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || echo none)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))' 2>&1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "carried libraries used (the system lacks them): $(ls "$DEVROOT/lib-missing" | tr '\n' ' ')"
  local l
  for l in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnvrtc.so.13; do
    echo "$l: $(find ${LD_LIBRARY_PATH//:/ } -maxdepth 1 -name "$l" 2>/dev/null | head -1)"
  done
  sed -n '1,3p' "$DEVROOT/MANIFEST"
}

# ---- build ----
find_one() { find "$@" 2>/dev/null | head -1; }

build_native() {
  local site inc="" extra=() cublas
  site=$("$PY" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  # cuBLAS: the toolkit's when it has it, else pip's (the same major version, 13).
  if ! ls /usr/local/cuda/lib64/libcublas.so* >/dev/null 2>&1 && [ -n "$site" ]; then
    cublas=$(find_one "$site/nvidia" -name 'libcublas.so*')
    [ -n "$cublas" ] && extra+=("-DCUDA_cublas_LIBRARY=$cublas" "-DCUDA_cublasLt_LIBRARY=$(find_one "$(dirname "$cublas")" -name 'libcublasLt.so*')")
  fi
  if [ ! -f /usr/local/cuda/include/cublas_v2.h ] && [ -n "$site" ]; then
    inc=$(dirname "$(find_one "$site/nvidia" -name cublas_v2.h)")
    [ "$inc" != . ] && inc="-isystem $inc" || inc=""
  fi
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPROTOBUF_C_LIB="$DEVROOT/link/libprotobuf-c.a" -DPROTOC_C="$DEVROOT/bin/protoc-c" \
    -DDNNL_LIB="$DEVROOT/link/libdnnl.so" -DONNX_PROTO="$DEVROOT/onnx/onnx.proto" \
    -DCMAKE_C_FLAGS="-isystem $DEVROOT/include $inc" -DCMAKE_CUDA_FLAGS="$inc" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$DEVROOT/lib" "${extra[@]}" &&
    ninja -C "$BUILD" scorch-run test_cuda_ops test_plan_offload
}

build_check() {
  if ldd "$BUILD/scorch-run" "$BUILD/tests/test_cuda_ops" | grep 'not found'; then
    say "unresolved libraries (above)"
    return 1
  fi
  "$BUILD/scorch-run" --help >/dev/null 2>&1 || "$BUILD/scorch-run" gen --help >/dev/null
}

stage_build() {
  setup_env || return 1
  if [ -f "$BUILD/.gpu_session_built" ] && build_check >/dev/null 2>&1; then
    echo "build: already built ($(cat "$BUILD/.gpu_session_built"))"
    return 0
  fi
  rm -f "$BUILD/.gpu_session_built"
  local kind=native
  if [ "$QUICK" = 1 ] && use_prebuilt && build_check; then
    kind=prebuilt
  elif [ "${SCORCH_GPU_PREBUILT:-0}" = 1 ] || ! build_native; then
    say "using the binaries prebuilt by gpu_pack.sh (SCORCH_GPU_PREBUILT=1, or the native build failed above)"
    kind=prebuilt
    use_prebuilt
  fi
  build_check || return 1
  ldd "$BUILD/scorch-run" | grep -E 'cublas|cudnn|dnnl|protobuf|gomp|OpenCL'
  echo "$kind, $(date -u +%H:%M:%SZ)" >"$BUILD/.gpu_session_built"
  echo "build: $kind"
}

# quick tries these first: a native build costs minutes of a 15-minute lend.
use_prebuilt() {
  mkdir -p "$BUILD/tests"
  cp "$DEVROOT/prebuilt/scorch-run" "$BUILD/scorch-run" &&
    cp "$DEVROOT/prebuilt/test_cuda_ops" "$BUILD/tests/test_cuda_ops" &&
    cp "$DEVROOT/prebuilt/test_plan_offload" "$BUILD/tests/test_plan_offload"
}

ensure_build() { [ -f "$BUILD/.gpu_session_built" ] || stage_build; }

# ---- test ----
# Gradients (step 1, --dump-grads) and losses (4 steps) of `train` on two configurations.
train_pair() {
  local name=$1 model=$2 a=$3 b=$4 tol=$5
  shift 5
  local dir=$TMPD/$name
  mkdir -p "$dir"
  local s
  for s in a b; do
    local cfg=${!s}          # a or b: the name of a configuration variable of stage_test
    local dev_args=${!cfg}   # its options
    # shellcheck disable=SC2086
    "$BUILD/scorch-run" train "$model" "$@" $dev_args --steps 4 --seed 3 --print-every 1 --log "$dir/$s.csv" \
      --dump-grads "$dir/$s.grads" -o "$dir/$s.onnx" >"$dir/$s.out" 2>&1 ||
      { echo "FAIL $name: train $dev_args"; tail -5 "$dir/$s.out"; return 1; }
  done
  "$PY" - "$dir" "$tol" "$name" "$a" "$b" <<'EOF'
import csv, glob, os, sys
import numpy as np
d, tol, name, a, b = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
la = [float(r["loss"]) for r in csv.DictReader(open(os.path.join(d, "a.csv")))]
lb = [float(r["loss"]) for r in csv.DictReader(open(os.path.join(d, "b.csv")))]
worst_l = max(abs(x - y) / (1 + abs(x)) for x, y in zip(la, lb))
worst_g, at = 0.0, ""
files = sorted(glob.glob(os.path.join(d, "a.grads", "*.npy")))
for f in files:
    g = np.load(f).astype(np.float64)
    h = np.load(os.path.join(d, "b.grads", os.path.basename(f))).astype(np.float64)
    e = float(np.abs(g - h).max() / (np.abs(g).max() + 1e-12)) if g.size else 0.0
    if e > worst_g:
        worst_g, at = e, os.path.basename(f)
ok = worst_l <= tol and worst_g <= tol and len(la) == len(lb) == 4 and len(files) > 0
print(f"{'ok  ' if ok else 'FAIL'} {name}: [{a}] vs [{b}] losses {la[0]:.6f}->{la[-1]:.6f} / {lb[0]:.6f}->{lb[-1]:.6f}, "
      f"max loss diff {worst_l:.2e}, max grad diff {worst_g:.2e} over {len(files)} gradients {at} (tol {tol:g})")
sys.exit(0 if ok else 1)
EOF
}

stage_test() {
  setup_env && ensure_build || return 1
  local rc=0 r
  timeout "$([ "$QUICK" = 1 ] && echo 120 || echo 300)" "$BUILD/tests/test_cuda_ops"
  r=$?
  echo "test_cuda_ops: exit $r"
  local dev=cuda
  if [ "${SCORCH_GPU_SIMULATE:-0}" = 1 ]; then
    say "SCORCH_GPU_SIMULATE=1: the train comparisons run with --device cpu on both sides (checks this script)"
    dev=cpu
  else
    [ $r = 77 ] && { say "no GPU: the CUDA checks were skipped"; return 77; }
    has_gpu || return 77
  fi
  [ $r = 0 ] || [ $r = 77 ] || rc=1
  TMPD=$(mktemp -d)
  local S=$BUILD/scorch-run
  "$S" gen resnet --depth 18 --width 16 --image 64 --classes 10 -o "$TMPD/resnet.onnx" >/dev/null &&
    "$S" gen gpt --layers 2 --heads 4 --dim 128 --vocab 512 --seq 64 -o "$TMPD/gpt.onnx" >/dev/null &&
    "$S" gen dranet --depth 50 --width 4 --image 16 --classes 5 --gamma 0.1 --residual-gamma 0.1 -o "$TMPD/dranet.onnx" >/dev/null || return 1
  # shellcheck disable=SC2034  # read through ${!s} in train_pair
  local cpu="--device cpu" cuda="--device $dev" capped="--device $dev --strategy sqrt --offload weights"
  train_pair resnet-cuda-vs-cpu "$TMPD/resnet.onnx" cpu cuda 2e-3 --batch 4 || rc=1
  if [ "$QUICK" != 1 ]; then
    train_pair gpt-cuda-vs-cpu "$TMPD/gpt.onnx" cpu cuda 2e-3 --batch 4 --seq 64 || rc=1
    train_pair dranet-cuda-vs-cpu "$TMPD/dranet.onnx" cpu cuda 2e-3 --batch 8 || rc=1
  fi
  train_pair gpt-capped-vs-cuda "$TMPD/gpt.onnx" cuda capped 1e-4 --batch 4 --seq 64 || rc=1
  [ "$QUICK" = 1 ] || train_pair dranet-capped-vs-cuda "$TMPD/dranet.onnx" cuda capped 1e-4 --batch 8 || rc=1
  grep -h "^plan " "$TMPD"/*/b.out 2>/dev/null
  if [ "$dev" = cuda ]; then
    # every strategy with offload on the GPU against none on the GPU, bit for bit
    timeout "$([ "$QUICK" = 1 ] && echo 90 || echo 300)" "$BUILD/tests/test_plan_offload" --cuda | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL test_plan_offload --cuda"; rc=1; }
    if [ "$QUICK" != 1 ]; then
      (mkdir -p "$TMPD/tc" && cd "$TMPD/tc" && timeout 400 "$PY" "$ROOT/tests/train_cuda_check.py" "$S") || rc=1
    fi
  fi
  rm -rf "$TMPD"
  return $rc
}

# ---- sanitize ----
stage_sanitize() {
  setup_env && ensure_build || return 1
  has_gpu || { say "no GPU: compute-sanitizer skipped"; return 77; }
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  local rc=0 tool r
  for tool in memcheck racecheck initcheck; do
    say "compute-sanitizer --tool $tool (at most ${SCORCH_SANITIZE_TIMEOUT:-150} s)"
    SCORCH_CUDA_SYNC=1 timeout "${SCORCH_SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 86 \
      --print-limit 30 "$BUILD/tests/test_cuda_ops" 2>&1 | grep -v '^[a-z_0-9]\+ \+ok$'
    r=${PIPESTATUS[0]}
    case $r in
    0) echo "$tool: clean" ;;
    124) echo "$tool: TIMED OUT (raise SCORCH_SANITIZE_TIMEOUT or run it in its own call)"; rc=1 ;;
    86) echo "$tool: ERRORS (above)"; rc=1 ;;
    *) echo "$tool: test_cuda_ops failed under the tool (exit $r)"; rc=1 ;;
    esac
  done
  return $rc
}

# ---- tradeoff ----
# The planning issue's trade-off tables measured on the GPU (`scorch-run bench --device cuda`):
# ResNet-50 batch 64 at 224x224 and GPT-2 small batch 8 at sequence 1024, strategies none / sqrt /
# dc / optimal at 60, 45, 37 and 30% of the store-everything peak; CSV and SVG into $OUT.
stage_tradeoff() {
  setup_env && ensure_build || return 1
  has_gpu || { say "no GPU: the GPU trade-off tables are skipped"; return 77; }
  local S=$BUILD/scorch-run T rc=0
  T=$(mktemp -d)
  "$S" gen resnet --depth 50 --image 224 --classes 1000 -o "$T/r50.onnx" >/dev/null &&
    "$S" gen gpt --preset small -o "$T/gpt2.onnx" >/dev/null || return 1
  local mem=60%,45%,37%,30% str=none,sqrt,dc,optimal
  timeout 270 "$S" bench "$T/r50.onnx" --device cuda --batch 64 --memories $mem --strategies $str --steps 3 \
    --csv "$OUT/tradeoff-resnet50.csv" --svg "$OUT/tradeoff-resnet50.svg" || rc=1
  timeout 270 "$S" bench "$T/gpt2.onnx" --device cuda --batch 8 --seq 1024 --memories $mem --strategies $str --steps 3 \
    --csv "$OUT/tradeoff-gpt2-small.csv" --svg "$OUT/tradeoff-gpt2-small.svg" || rc=1
  rm -rf "$T"
  return $rc
}

# ---- bench ----
QUICK_BENCH_ARGS="--models resnet50,stream,gpt2 --tf32 on --precision fp32,bf16 --steps 8 --warmup 2 --budget-s 150"

stage_bench() {
  setup_env && ensure_build || return 1
  local args=${SCORCH_BENCH_ARGS:-}
  [ "$QUICK" = 1 ] && [ -z "$args" ] && args=$QUICK_BENCH_ARGS
  [ "${SCORCH_GPU_SIMULATE:-0}" = 1 ] && ! has_gpu && args="$args --smoke-cpu"
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/train_vs_torch_gpu.py" --scorch-run "$BUILD/scorch-run" --out-dir "$OUT" $args || return 1
  [ "${SCORCH_GPU_SIMULATE:-0}" = 1 ] && return 0
  has_gpu || return 77 # the script said SKIP
}

run_stage() {
  local st=$1 t0 r
  t0=$(date +%s)
  say "stage $st: start"
  "stage_$st" 2>&1 | tee "$OUT/$st.log"
  r=${PIPESTATUS[0]}
  local dt=$(( $(date +%s) - t0 )) word
  case $r in 0) word=ok ;; 77) word=SKIPPED ;; *) word=FAILED; FAILED=1 ;; esac
  echo "== stage $st: $word (${dt} s)" | tee -a "$OUT/$st.log"
  SUMMARY+=("$st: $word (${dt} s)")
}

stages=("$@")
[ ${#stages[@]} = 0 ] && stages=(env build test)
[ "${stages[0]}" = all ] && stages=(env build test sanitize bench tradeoff)
QUICK=0
[ "${stages[0]}" = quick ] && QUICK=1 && stages=(env build test bench)
for s in "${stages[@]}"; do
  case $s in env | build | test | sanitize | bench | tradeoff) ;; *) echo "usage: $0 [env] [build] [test] [sanitize] [bench] [tradeoff] | all | quick" >&2; exit 2 ;; esac
done
T0=$(date +%s)
setup_env >/dev/null || { echo "gpu_session: cannot set up (devlib missing?)" >&2; exit 1; }
for s in "${stages[@]}"; do run_stage "$s"; done
echo "== gpu_session: ${SUMMARY[*]}; total $(( $(date +%s) - T0 )) s; logs in $OUT"
exit $FAILED
