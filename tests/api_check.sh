#!/usr/bin/env bash
# The installed library as a user meets it (tests/api.cmake): `cmake --install` into a fresh prefix,
# examples/train.c built with `pkg-config --cflags --libs scorch` alone and again through
# find_package(Scorch), only scorch_* symbols exported, and the example's trained model
# byte-identical to `scorch-run train` with the same options (with and without a memory budget).
#   api_check.sh BUILD_DIR SOURCE_DIR SCORCH_RUN WORK_DIR
set -euo pipefail
build=$1 src=$2 scorch=$3 work=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work/prefix" "$work/cmakeproj"
mkdir -p "$work" && cd "$work"
cmake --install "$build" --prefix "$work/prefix" > install.log || fail "cmake --install: $(cat install.log)"
pc=$(find "$work/prefix" -name scorch.pc | head -1)
[ -n "$pc" ] || fail "no scorch.pc installed"
lib=$(find "$work/prefix" -name 'libscorch.so.0' | head -1)
[ -n "$lib" ] || fail "no libscorch.so.0 installed"
others=$(nm -D --defined-only "$lib" | awk '$3 !~ /^scorch_/ && $3 != "SCORCH_0"' | head -5)
[ -z "$others" ] || fail "libscorch exports more than scorch_*: $others"

# pkg-config alone
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs scorch)
cc -std=c11 -Wall -Werror "$src/examples/train.c" $flags -o train_pc || fail "example did not build with: $flags"

"$scorch" gen gpt --layers 1 --heads 2 --dim 16 --vocab 64 --seq 8 -o g.onnx > /dev/null
common=(steps=3 seq=8 batch=2 lr=0.02 threads=1 optimizer=adamw)
./train_pc g.onnx api.onnx "${common[@]}" > api.log || fail "example: $(cat api.log)"
"$scorch" train g.onnx -o cli.onnx --steps 3 --seq 8 --batch 2 --lr 0.02 --threads 1 --optimizer adamw \
  --device cpu > cli.log 2>&1 || fail "scorch-run train: $(cat cli.log)"
cmp api.onnx cli.onnx || fail "the example's model differs from scorch-run train's"
./train_pc g.onnx api_dc.onnx "${common[@]}" memory=64KiB strategy=dc offload=weights > api_dc.log ||
  fail "example with a budget: $(cat api_dc.log)"
cmp api_dc.onnx cli.onnx || fail "the example under a dc plan with streamed weights differs from the store-all run"
grep -q "device peak -1 " api.log || fail "a run without a budget reports a device peak: $(cat api.log)"
peak=$(awk '/device peak/{print $(NF-1)}' api_dc.log | sort -n | tail -1)
[ "$peak" -gt 0 ] && [ "$peak" -le 65536 ] || fail "the budgeted run's device peak $peak is not within 64 KiB"

# inference: the API's output equals scorch-run run's on the same token ids; saving writes the
# model back unchanged (the generator writes raw data, as saving does)
cc -std=c11 -Wall -Werror "$src/tests/api_run.c" $flags -o api_run || fail "api_run did not build"
python3 -c "import numpy as np; ids = (np.arange(16, dtype=np.int64).reshape(2, 8) * 7) % 64; np.save('ids.npy', ids); ids.tofile('ids.bin')"
./api_run g.onnx 2 8 ids.bin logits.bin saved.onnx || fail "api_run"
"$scorch" run g.onnx --batch 2 --seq 8 --input input_ids=ids.npy --output-dir run_out --threads 1 > run.log 2>&1 ||
  fail "scorch-run run: $(cat run.log)"
python3 - <<PY || fail "the API's logits differ from scorch-run run's"
import glob, numpy as np, sys
ref = np.load(sorted(glob.glob("run_out/*.npy"))[0])
got = np.fromfile("logits.bin", dtype=np.float32)
sys.exit(0 if ref.dtype == np.float32 and ref.tobytes() == got.tobytes() else 1)
PY
cmp saved.onnx g.onnx || fail "load + save through the API changed the model"

# errors are values with messages, and the example exits 1 on them
if ./train_pc g.onnx bad.onnx bogus=1 > bad.log 2>&1; then fail "an unknown option was accepted"; fi
grep -q "unknown option 'bogus'" bad.log || fail "unknown option message: $(cat bad.log)"
if ./train_pc missing.onnx bad.onnx > bad.log 2>&1; then fail "a missing model was accepted"; fi
grep -q "missing.onnx" bad.log || fail "missing model message: $(cat bad.log)"
[ ! -e bad.onnx ] || fail "a failed run wrote its model"

# find_package(Scorch)
mkdir -p cmakeproj
cat > cmakeproj/CMakeLists.txt <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(scorch_example C)
find_package(Scorch 0.2 REQUIRED)
add_executable(train_cmake $src/examples/train.c)
target_link_libraries(train_cmake PRIVATE Scorch::scorch)
CMAKE
cmake -S cmakeproj -B cmakeproj/build -DCMAKE_PREFIX_PATH="$work/prefix" > cmake.log 2>&1 || fail "find_package: $(cat cmake.log)"
cmake --build cmakeproj/build > cmake_build.log 2>&1 || fail "build through find_package: $(cat cmake_build.log)"
LD_LIBRARY_PATH=$(dirname "$lib") cmakeproj/build/train_cmake g.onnx api2.onnx "${common[@]}" > api2.log ||
  fail "example built by CMake: $(cat api2.log)"
cmp api2.onnx cli.onnx || fail "the CMake-built example's model differs"
echo "api: installed, built with pkg-config and find_package, models identical to scorch-run train"
