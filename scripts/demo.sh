#!/usr/bin/env bash
# The main job on embedded defaults: build; generate a small ResNet, DRANet and GPT, show what they
# are and run them forward on the CPU; then train a ResNet and a GPT on the built-in synthetic data,
# write them back as ONNX and show the loss going down (scripts/demo_train.sh).
# Outputs land in ${DEMO_DIR:-out/demo}/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
RUN=build/scorch-run
DIR=${DEMO_DIR:-out/demo}
mkdir -p "$DIR"

step() { printf '\n== %s\n' "$*"; }

step "ResNet-18 (width 32, 64x64 images, 10 classes)"
$RUN gen resnet --depth 18 --width 32 --image 64 --classes 10 -o "$DIR/resnet18.onnx"
$RUN info "$DIR/resnet18.onnx" --batch 2
$RUN run "$DIR/resnet18.onnx" --batch 2 --output-dir "$DIR/resnet18.out"

step "DRANet-50 (64x64 images, 19 classes)"
$RUN gen dranet --depth 50 --image 64 --classes 19 -o "$DIR/dranet50.onnx"
$RUN info "$DIR/dranet50.onnx" --batch 1
$RUN run "$DIR/dranet50.onnx" --batch 1 --output-dir "$DIR/dranet50.out"

step "GPT (4 layers, 4 heads, dim 128, vocab 512, seq 64)"
$RUN gen gpt --layers 4 --heads 4 --dim 128 --vocab 512 --seq 64 -o "$DIR/gpt.onnx"
$RUN info "$DIR/gpt.onnx" --batch 2 --seq 64
$RUN run "$DIR/gpt.onnx" --batch 2 --seq 64 --output-dir "$DIR/gpt.out"

SCORCH_RUN=$RUN DEMO_DIR="$DIR/train" bash scripts/demo_train.sh

printf '\nDone: models, outputs and loss logs are in %s/\n' "$DIR"
