#!/usr/bin/env bash
# Training on embedded defaults: generate a small ResNet and a small GPT, train each 30 steps on the
# CPU on the built-in synthetic data (seeded, learnable: class prototypes plus noise for images, a
# random Markov chain for tokens), write the trained models back as ONNX and show the loss going
# down. Outputs land in ${DEMO_DIR:-out/demo_train}/. SCORCH_RUN=path skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SCORCH_RUN:-}" ]; then
  bash scripts/build.sh
  SCORCH_RUN=build/scorch-run
fi
RUN=$SCORCH_RUN
DIR=${DEMO_DIR:-out/demo_train}
mkdir -p "$DIR"

step() { printf '\n== %s\n' "$*"; }

step "ResNet-18 (width 16, 32x32 images, 10 classes): 30 steps of SGD with momentum, batch 16"
$RUN gen resnet --depth 18 --width 16 --image 32 --classes 10 -o "$DIR/resnet18.onnx"
$RUN train "$DIR/resnet18.onnx" -o "$DIR/resnet18.trained.onnx" --batch 16 --steps 30 --lr 0.02 \
  --log "$DIR/resnet18.csv"
$RUN run "$DIR/resnet18.trained.onnx" --batch 2

step "GPT (2 layers, 2 heads, dim 64, vocab 256, seq 32): 30 steps of AdamW with cosine schedule, batch 8"
$RUN gen gpt --layers 2 --heads 2 --dim 64 --vocab 256 --seq 32 -o "$DIR/gpt.onnx"
$RUN train "$DIR/gpt.onnx" -o "$DIR/gpt.trained.onnx" --batch 8 --seq 32 --steps 30 --optimizer adamw \
  --lr 3e-3 --schedule cosine --warmup 3 --log "$DIR/gpt.csv"
$RUN run "$DIR/gpt.trained.onnx" --batch 2 --seq 32

printf '\nDone: models and loss logs (CSV) are in %s/\n' "$DIR"
