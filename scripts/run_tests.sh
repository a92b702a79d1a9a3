#!/usr/bin/env bash
# Builds Scorch and runs its test suite twice:
#   1. Release build in build/: every ctest entry (unit tests, ONNX conformance, onnxruntime oracles).
#   2. AddressSanitizer + UBSan build in build-asan/: the C unit tests (test_*) and the ONNX
#      conformance cases (onnx_node_*); the Python-driven whole-model tests (oracles, CLI) are left
#      to the Release run to keep this one fast.
#   3. The CUDA backend on the CPU emulator of CUDA (tests/cuda_emu), ASan/UBSan, in
#      build-cuda-emu/: the tests labelled cuda (cross-backend ops, streaming plans, whole-model
#      training against the CPU and across plans) and the device CLI test, first with the
#      emulator's dependency-directed stream schedule, then test_plan_offload --cuda again with a
#      random interleaving of the streams (seed printed); then test_cuda_ops under ThreadSanitizer
#      (build-cuda-emu-tsan/: races between the threads of a block, compute-sanitizer's racecheck).
#      No GPU needed.
#   4. Portability (build-portable/): clang builds every target for x86-64-v2 and without MPI, a CPU without F16C,
#      AVX, FMA or avx512fp16, so a compiler half type (_Float16 is refused by clang 14 there) or a
#      CPU-specific intrinsic without a fallback fails the build on any machine; then the C unit
#      tests and half_check (every f16 pattern against numpy) run on the scalar paths it built, and
#      dist_nompi: a job launched by mpirun on a build without MPI says what is missing.
#   5. Bounded importer fuzzing (scripts/fuzz_ci.sh: clang, libFuzzer, ASan/UBSan, 120 s) when clang
#      is installed; skipped with a message otherwise.
# Stages 2, 3 and 5 build for a fixed CPU baseline (BASELINE_MARCH: x86-64-v3 where this CPU runs
# it, else x86-64-v2), not -march=native, so their results do not depend on the developer's CPU.
# Exits non-zero if any stage has a failure. Run scripts/install.sh first on a fresh machine.
#   JOBS=N scripts/run_tests.sh      parallel ctest jobs (default 2)
#   SKIP_ASAN=1 scripts/run_tests.sh no sanitizer run
#   SKIP_CUDA_EMU=1 scripts/run_tests.sh  no CUDA emulator stage
#   SKIP_PORTABLE=1 scripts/run_tests.sh  no portability stage
#   SKIP_FUZZ=1 scripts/run_tests.sh no fuzzing stage (FUZZ_SECONDS=N sets its length)
#   BUILD_DIR=... ASAN_BUILD_DIR=... EMU_BUILD_DIR=...  other build folders (default build,
#                                    build-asan, build-cuda-emu)
set -uo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
EMU_BUILD_DIR=${EMU_BUILD_DIR:-build-cuda-emu}
EMU_TSAN_BUILD_DIR=${EMU_TSAN_BUILD_DIR:-build-cuda-emu-tsan}
PORT_BUILD_DIR=${PORT_BUILD_DIR:-build-portable}
status=0

step() { echo; echo "== run_tests.sh: $*"; }

# x86-64-v3 needs AVX2, FMA, F16C, BMI1/2, LZCNT and MOVBE; a CPU without them gets x86-64-v2.
if [ -z "${BASELINE_MARCH:-}" ]; then
  BASELINE_MARCH=x86-64-v3
  for flag in avx2 fma f16c bmi1 bmi2 abm movbe; do
    grep -qw "$flag" /proc/cpuinfo 2>/dev/null || BASELINE_MARCH=x86-64-v2
  done
fi
export BASELINE_MARCH
echo "run_tests.sh: sanitizer, emulator and fuzzing builds use -march=$BASELINE_MARCH"

step "Release build ($BUILD_DIR/)"
if cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD_DIR"; then
  step "ctest (Release)"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" || status=1
else
  echo "run_tests.sh: Release build failed" >&2
  status=1
fi

if [ "${SKIP_ASAN:-0}" != 1 ]; then
  step "ASan/UBSan build ($ASAN_BUILD_DIR/)"
  if cmake -S . -B "$ASAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCORCH_SANITIZE=ON \
       -DSCORCH_MARCH="$BASELINE_MARCH" &&
     cmake --build "$ASAN_BUILD_DIR"; then
    step "ctest (ASan/UBSan: unit tests and conformance)"
    ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure -j"$JOBS" -R '^(test_|onnx_node_)' || status=1
  else
    echo "run_tests.sh: sanitizer build failed" >&2
    status=1
  fi
fi

if [ "${SKIP_CUDA_EMU:-0}" != 1 ]; then
  step "CUDA backend on the CPU emulator of CUDA, ASan/UBSan ($EMU_BUILD_DIR/)"
  if cmake -S . -B "$EMU_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCORCH_CUDA_EMU=ON -DSCORCH_SANITIZE=ON \
       -DSCORCH_MARCH="$BASELINE_MARCH" &&
     cmake --build "$EMU_BUILD_DIR" --target scorch-run test_cuda_ops test_plan_offload; then
    emu_tests='^(test_cuda_ops|test_plan_offload_cuda|train_cuda_vs_cpu|device_cli|dist_cuda)$'
    step "ctest (CUDA emulator: dependency-directed schedule)"
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$EMU_BUILD_DIR" --output-on-failure -j"$JOBS" -R "$emu_tests" || status=1
    seed=${SCORCH_CUDA_EMU_SEED:-$(date +%s)}
    step "test_plan_offload --cuda (CUDA emulator: random stream interleaving, SCORCH_CUDA_EMU_SEED=$seed)"
    ( cd "$EMU_BUILD_DIR/tests" && SCORCH_CUDA_EMU_SCHED=random SCORCH_CUDA_EMU_SEED=$seed ASAN_OPTIONS=detect_leaks=1 \
        ./test_plan_offload --cuda | tail -3 ) || status=1
  else
    echo "run_tests.sh: CUDA emulator build failed" >&2
    status=1
  fi
  step "test_cuda_ops under ThreadSanitizer on the CUDA emulator ($EMU_TSAN_BUILD_DIR/)"
  tsan=-fsanitize=thread
  if cmake -S . -B "$EMU_TSAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCORCH_CUDA_EMU=ON \
       -DSCORCH_MARCH="$BASELINE_MARCH" -DCMAKE_C_FLAGS=$tsan -DCMAKE_CXX_FLAGS=$tsan -DCMAKE_EXE_LINKER_FLAGS=$tsan &&
     cmake --build "$EMU_TSAN_BUILD_DIR" --target test_cuda_ops; then
    # one OpenMP thread: libgomp is not instrumented; a TSan report makes the exit code 66
    ( cd "$EMU_TSAN_BUILD_DIR/tests" && OMP_NUM_THREADS=1 ./test_cuda_ops | tail -1 ) || status=1
  else
    echo "run_tests.sh: CUDA emulator ThreadSanitizer build failed" >&2
    status=1
  fi
fi

if [ "${SKIP_PORTABLE:-0}" != 1 ]; then
  step "portability: clang, -march=x86-64-v2, every target ($PORT_BUILD_DIR/)"
  port_cc=$(command -v clang-14 || command -v clang || true)
  if [ -z "$port_cc" ]; then
    echo "run_tests.sh: the portability stage needs clang (apt-get install clang-14)" >&2
    status=1
  elif CC=$port_cc CXX=${port_cc/clang/clang++} cmake -S . -B "$PORT_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DSCORCH_MARCH=x86-64-v2 -DSCORCH_MPI=OFF -DCMAKE_C_FLAGS=-Wno-pass-failed >/dev/null &&
       cmake --build "$PORT_BUILD_DIR"; then
    step "ctest (portable build: C unit tests and half_check on the scalar paths)"
    ctest --test-dir "$PORT_BUILD_DIR" --output-on-failure -j"$JOBS" -R '^(test_|half_check$|dist_nompi$)' || status=1
  else
    echo "run_tests.sh: the portable build failed: a compiler half type (_Float16, __fp16, __bf16) or a" \
         "CPU-specific intrinsic without a fallback? Use core/half.h and guard intrinsics (core/half.c)." >&2
    status=1
  fi
fi

if [ "${SKIP_FUZZ:-0}" = 1 ]; then
  step "fuzzing skipped (SKIP_FUZZ=1)"
elif ! command -v clang-14 >/dev/null && ! command -v clang >/dev/null; then
  step "fuzzing skipped: clang not found (apt-get install clang-14 libclang-rt-14-dev)"
else
  step "importer fuzzing (scripts/fuzz_ci.sh)"
  scripts/fuzz_ci.sh || status=1
fi

if [ "$status" -eq 0 ]; then step "all tests passed"; else step "FAILED"; fi
exit "$status"
