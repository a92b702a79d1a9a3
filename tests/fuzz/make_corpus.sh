#!/usr/bin/env bash
# Seed corpus for fuzz_import (tests/fuzz/fuzz_import.c): writes small ONNX models into OUT_DIR, which
# must lie outside the source tree (a build folder or /tmp).
#   tests/fuzz/make_corpus.sh OUT_DIR [SCORCH_RUN]
# Seeds:
#   - ~300 of the onnx package's backend node tests (model.onnx only): every second case of
#     tests/conformance/cases.txt (ops Scorch supports: deep paths through attributes, shape inference
#     and folding) and every eighth of the others (unsupported ops: the refusal paths);
#   - a few tiny models from `scorch-run gen` (ResNet, DRANet, GPT: real-sized graphs, initializers,
#     PyTorch-style shape subgraphs) when SCORCH_RUN (argument or $SCORCH_RUN) is given.
# Files over MAX_LEN bytes (default 1048576, the fuzzer's -max_len) are left out. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:?usage: make_corpus.sh OUT_DIR [SCORCH_RUN]}
scorch_run=${2:-${SCORCH_RUN:-}}
max_len=${MAX_LEN:-1048576}
mkdir -p "$out"
out="$(cd "$out" && pwd)"
case "$out/" in "$(cd "$here/../.." && pwd)"/build*) ;; "$(cd "$here/../.." && pwd)"/*)
  echo "make_corpus.sh: $out is inside the source tree; use a build folder or /tmp" >&2; exit 2;; esac

node_dir="$(python3 -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data/node"
[ -d "$node_dir" ] || { echo "make_corpus.sh: no onnx node tests at $node_dir" >&2; exit 1; }
cases="$here/../conformance/cases.txt"

add() { # add SRC NAME: copy when small enough
  local size; size=$(stat -c %s "$1")
  if [ "$size" -gt 0 ] && [ "$size" -le "$max_len" ]; then cp "$1" "$out/$2"; fi
}

n_sup=0; n_other=0; i_sup=0; i_other=0
for d in $(ls "$node_dir" | sort); do
  [ -f "$node_dir/$d/model.onnx" ] || continue
  if grep -qx "$d" "$cases"; then
    i_sup=$((i_sup + 1)); [ $((i_sup % 2)) -eq 1 ] || continue; n_sup=$((n_sup + 1))
  else
    i_other=$((i_other + 1)); [ $((i_other % 8)) -eq 1 ] || continue; n_other=$((n_other + 1))
  fi
  add "$node_dir/$d/model.onnx" "node_$d.onnx"
done
echo "make_corpus.sh: $n_sup supported and $n_other other onnx node tests"

if [ -n "$scorch_run" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  gen() { local name=$1; shift; "$scorch_run" gen "$@" -o "$tmp/$name.onnx" >/dev/null && add "$tmp/$name.onnx" "gen_$name.onnx"; }
  gen resnet3 resnet --depth 3 --image 16 --width 4 --classes 3
  gen resnet7 resnet --depth 7 --image 32 --width 8 --classes 5
  gen resnet18 resnet --depth 18 --image 32 --width 4 --classes 4
  gen dranet dranet --depth 50 --image 32 --width 2 --classes 3 --gamma 0.5
  gen gpt1 gpt --layers 1 --heads 1 --dim 8 --vocab 16 --seq 8
  gen gpt2 gpt --layers 2 --heads 2 --dim 16 --vocab 50 --seq 16
  echo "make_corpus.sh: generated models: $(ls "$out" | grep -c '^gen_' || true)"
else
  echo "make_corpus.sh: no scorch-run given; generated models left out"
fi
echo "make_corpus.sh: $(ls "$out" | wc -l) files in $out"
