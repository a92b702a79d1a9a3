#!/usr/bin/env bash
# Builds Scorch and runs its test suite twice:
#   1. Release build in build/: every ctest entry (unit tests, ONNX conformance, onnxruntime oracles).
#   2. AddressSanitizer + UBSan build in build-asan/: the C unit tests (test_*) and the ONNX
#      conformance cases (onnx_node_*); the Python-driven whole-model tests (oracles, CLI) are left
#      to the Release run to keep this one fast.
#   3. Bounded importer fuzzing (scripts/fuzz_ci.sh: clang, libFuzzer, ASan/UBSan, 120 s) when clang
#      is installed; skipped with a message otherwise.
# Exits non-zero if any stage has a failure. Run scripts/install.sh first on a fresh machine.
#   JOBS=N scripts/run_tests.sh      parallel ctest jobs (default 2)
#   SKIP_ASAN=1 scripts/run_tests.sh no sanitizer run
#   SKIP_FUZZ=1 scripts/run_tests.sh no fuzzing stage (FUZZ_SECONDS=N sets its length)
#   BUILD_DIR=... ASAN_BUILD_DIR=...  other build folders (default build, build-asan)
set -uo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
status=0

step() { echo; echo "== run_tests.sh: $*"; }

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
  if cmake -S . -B "$ASAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCORCH_SANITIZE=ON &&
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
