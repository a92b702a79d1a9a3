#!/usr/bin/env bash
# Bounded fuzzing of the ONNX importer for CI: builds the libFuzzer configuration with clang
# (ASan + UBSan + -fsanitize=fuzzer, tests/fuzz.cmake) into build-fuzz/, builds the seed corpus
# (tests/fuzz/make_corpus.sh: onnx node tests and tiny generated models) and runs fuzz_import for
# FUZZ_SECONDS (default 120) on one core. Exits non-zero on any crash, leak, timeout or OOM; the
# input is left in $FUZZ_DIR/artifacts/ (minimise it with -minimize_crash=1, add it under
# tests/fuzz/regressions/ and fix the importer).
#   FUZZ_SECONDS=N     run length
#   FUZZ_BUILD_DIR=... build folder (default build-fuzz)
#   FUZZ_DIR=...       corpus and artifacts (default $FUZZ_BUILD_DIR/fuzz-run); the corpus grows
#                      across runs, so later runs start where earlier ones stopped
#   CC=...             clang to use (default: clang-14 or clang, whichever exists)
#   BASELINE_MARCH=... -march= of the build (default x86-64-v3: the same code whatever this CPU is;
#                      scripts/run_tests.sh passes x86-64-v2 on a CPU that cannot run v3)
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-120}
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
FUZZ_DIR=${FUZZ_DIR:-$FUZZ_BUILD_DIR/fuzz-run}
if [ -z "${CC:-}" ]; then
  CC=$(command -v clang-14 || command -v clang || true)
fi
CXX=${CXX:-$(command -v "${CC/clang/clang++}" || true)}
if [ -z "$CC" ] || ! "$CC" --version 2>/dev/null | grep -q clang; then
  echo "fuzz_ci.sh: clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi

echo "== fuzz_ci.sh: building fuzz_import with $CC into $FUZZ_BUILD_DIR/"
CC="$CC" CXX="$CXX" cmake -S . -B "$FUZZ_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSCORCH_SANITIZE=ON -DSCORCH_FUZZ=ON -DSCORCH_MARCH="${BASELINE_MARCH:-x86-64-v3}" >/dev/null
cmake --build "$FUZZ_BUILD_DIR" --target fuzz_import scorch-run

echo "== fuzz_ci.sh: seed corpus"
mkdir -p "$FUZZ_DIR/seeds" "$FUZZ_DIR/corpus" "$FUZZ_DIR/artifacts"
# The sanitized scorch-run writes the generated seeds; its leak checker is irrelevant here.
ASAN_OPTIONS=detect_leaks=0 tests/fuzz/make_corpus.sh "$FUZZ_DIR/seeds" "$FUZZ_BUILD_DIR/scorch-run"
cp tests/fuzz/regressions/* "$FUZZ_DIR/seeds/" 2>/dev/null || true

echo "== fuzz_ci.sh: fuzzing for ${FUZZ_SECONDS}s"
status=0
"$FUZZ_BUILD_DIR/tests/fuzz_import" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
  -max_len=1048576 -dict=tests/fuzz/onnx.dict -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/artifacts/" \
  "$FUZZ_DIR/corpus" "$FUZZ_DIR/seeds" 2>"$FUZZ_DIR/fuzz.log" || status=$?
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$FUZZ_DIR/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  echo "fuzz_ci.sh: FAILED (exit $status); last lines of $FUZZ_DIR/fuzz.log:" >&2
  tail -40 "$FUZZ_DIR/fuzz.log" >&2
  ls -l "$FUZZ_DIR/artifacts/" >&2
  exit 1
fi
echo "== fuzz_ci.sh: no findings"
