#!/usr/bin/env bash
# Builds Scorch and runs its test suite twice:
#   1. Release build in build/: every ctest entry (unit tests, ONNX conformance, onnxruntime oracles).
#   2. AddressSanitizer + UBSan build in build-asan/: the C unit tests (test_*) and the ONNX
#      conformance cases (onnx_node_*); the Python-driven whole-model tests (oracles, CLI) are left
#      to the Release run to keep this one fast.
# Exits non-zero if either run has a failure. Run scripts/install.sh first on a fresh machine.
#   JOBS=N scripts/run_tests.sh      parallel ctest jobs (default 2)
#   SKIP_ASAN=1 scripts/run_tests.sh only the Release run
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

if [ "$status" -eq 0 ]; then step "all tests passed"; else step "FAILED"; fi
exit "$status"
