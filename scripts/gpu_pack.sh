#!/usr/bin/env bash
# Fills devlib/ (git-ignored) with what a GPU session needs on the lent device machine and cannot
# find there: that machine has nvcc 13, CMake, ninja and python3 with PyTorch (cuDNN / cuBLAS in its
# pip packages) but none of the Debian libraries our build links (README: DEVICE notes). Run it here,
# after the last source change, then hand `carry: ["devlib"]` to every device call; the device side
# is scripts/gpu_session.sh.
#
#   scripts/gpu_pack.sh [BUILD_DIR]       (default build-gpupack)
#
# devlib/devroot.tar.xz unpacks to devroot/ with
#   include/   oneDNN and protobuf-c headers (a native build on the device, gpu_session.sh build)
#   lib/       the shared libraries of `ldd scorch-run` that the device may lack (oneDNN, protobuf-c,
#              libgomp, the OpenCL ICD loader that Debian's oneDNN links); gpu_session.sh puts on
#              LD_LIBRARY_PATH only those the device's ldconfig does not know
#   link/      what the native build links: libdnnl.so (-> ../lib) and libprotobuf-c.a (static), in a
#              folder of their own so the build's RUNPATH does not shadow the device's libgomp
#   onnx/      onnx.proto and the protoc-c bindings generated here from it; bin/protoc-c is a stand-in
#              that copies them (the device has no protoc-c; the output is the same bytes)
#   prebuilt/  scorch-run, test_cuda_ops and test_plan_offload built here for x86-64-v3 (any x86-64 of the last decade,
#              whatever this machine's -march=native is), the fallback when the native build fails; without
#              MPI and NCCL (libnccl alone is 218 MB, over the carry limit; a lent machine has one GPU)
#   MANIFEST   the commit, the uncommitted files, date and checksums the binaries were built from
# Left out on purpose (the device has them): glibc, libstdc++, libgcc_s, cuBLAS, cuDNN, CUDA runtime.
# Fails if what travels (tracked + untracked files + devlib) would exceed the 64 MiB carry limit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpupack}
PACK=$ROOT/devlib
LIMIT_MIB=60 # the device tool's limit is 64 MiB; keep room for files added after packing
t0=$(date +%s)

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_pack: nvcc not found: the pack needs the CUDA backend built" >&2; exit 1; }
export PATH=$PATH:/usr/local/cuda/bin

# 1. A portable build: CMakeLists.txt fixes -march=native for Release, so use a build type of our own
#    whose flags CMake takes from CMAKE_<LANG>_FLAGS_GPUPACK.
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=GpuPack \
  -DCMAKE_C_FLAGS_GPUPACK="-O3 -march=x86-64-v3 -DNDEBUG" -DCMAKE_CXX_FLAGS_GPUPACK="-O3 -march=x86-64-v3 -DNDEBUG" \
  -DCMAKE_CUDA_FLAGS_GPUPACK="-O3 -DNDEBUG" -DSCORCH_MPI=OFF -DSCORCH_NCCL=OFF >"$BUILD/configure-gpupack.log" 2>&1 ||
  { cat "$BUILD/configure-gpupack.log" >&2; exit 1; }
grep "scorch: CUDA backend" "$BUILD/configure-gpupack.log" || { echo "gpu_pack: the CUDA backend is not part of this build" >&2; exit 1; }
nice -n 10 ninja -C "$BUILD" scorch-run test_cuda_ops test_plan_offload >/dev/null

# 2. Stage devroot/.
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
D=$STAGE/devroot
mkdir -p "$D/include" "$D/lib" "$D/link" "$D/onnx" "$D/bin" "$D/prebuilt"
cp "$BUILD/scorch-run" "$BUILD/tests/test_cuda_ops" "$BUILD/tests/test_plan_offload" "$D/prebuilt/"
strip --strip-unneeded "$D/prebuilt/"* 2>/dev/null || true
# Libraries the device lacks: the ldd closure minus glibc, the C++ runtime and the CUDA libraries.
DEVICE_HAS='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libcudnn|libcudart|libcuda\.so)'
ldd "$BUILD/scorch-run" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
  if [[ $soname =~ $DEVICE_HAS ]]; then continue; fi
  cp -L "$path" "$D/lib/$soname"
done
dnnl=("$D"/lib/libdnnl.so.*)
[ -f "${dnnl[0]}" ] || { echo "gpu_pack: libdnnl not in the ldd closure of scorch-run" >&2; exit 1; }
ln -s "../lib/$(basename "${dnnl[0]}")" "$D/link/libdnnl.so"
PBC_A=$(grep '^PROTOBUF_C_LIB:' "$BUILD/CMakeCache.txt" | cut -d= -f2)
cp "${PBC_A%.so}.a" "$D/link/libprotobuf-c.a" 2>/dev/null || cp /usr/lib/x86_64-linux-gnu/libprotobuf-c.a "$D/link/"
# Headers: oneDNN (dnnl*.h and oneapi/dnnl/) and protobuf-c.
cp /usr/include/dnnl*.h "$D/include/" 2>/dev/null || true
[ -d /usr/include/oneapi ] && cp -r /usr/include/oneapi "$D/include/"
cp -r /usr/include/protobuf-c "$D/include/"
# onnx.proto and its generated bindings; the protoc-c stand-in copies them to --c_out.
ONNX_PROTO=$(grep '^ONNX_PROTO:' "$BUILD/CMakeCache.txt" | cut -d= -f2)
cp "$ONNX_PROTO" "$D/onnx/"
cp "$BUILD/gen/onnx/onnx.pb-c.c" "$BUILD/gen/onnx/onnx.pb-c.h" "$D/onnx/"
cat >"$D/bin/protoc-c" <<'EOF'
#!/bin/sh
# Stand-in for protoc-c on the device: copies the bindings that gpu_pack.sh generated from the same
# onnx.proto with the real protoc-c (devroot/onnx/). Only --c_out=DIR is used.
here=$(cd "$(dirname "$0")/.." && pwd)
for a in "$@"; do case $a in --c_out=*) out=${a#--c_out=} ;; esac; done
[ -n "$out" ] || { echo "protoc-c stand-in: no --c_out" >&2; exit 1; }
mkdir -p "$out" && cp "$here/onnx/onnx.pb-c.c" "$here/onnx/onnx.pb-c.h" "$out/"
EOF
chmod +x "$D/bin/protoc-c"
{
  echo "built by scripts/gpu_pack.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n)"
  echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "uncommitted changes when packed (the prebuilt binaries include them):"
  git -C "$ROOT" status --short 2>/dev/null | sed 's/^/  /'
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "cuDNN used: $(grep -o 'convolutions on .*' "$BUILD/configure-gpupack.log")"
  echo "files:"
  (cd "$D" && find . -type f -o -type l | sort | while read -r f; do
    if [ -L "$f" ]; then echo "  $f -> $(readlink "$f")"; else echo "  $f $(stat -c %s "$f") $(sha256sum "$f" | cut -c1-16)"; fi
  done)
} >"$D/MANIFEST"

# 3. Pack and check the carry limit.
mkdir -p "$PACK"
rm -f "$PACK/devroot.tar.xz"
tar -C "$STAGE" -cf - devroot | xz -T0 -6 >"$PACK/devroot.tar.xz"
cp "$D/MANIFEST" "$PACK/MANIFEST"
pack_b=$(du -cb "$PACK"/* | tail -1 | cut -f1)
tree_b=$(cd "$ROOT" && git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
total_mib=$(( (pack_b + tree_b) / 1048576 ))
echo "gpu_pack: devlib $((pack_b / 1024)) KiB, working tree $((tree_b / 1024)) KiB, total ${total_mib} MiB of the 64 MiB carry limit"
echo "gpu_pack: done in $(( $(date +%s) - t0 )) s; run on the device with carry [\"devlib\"]: scripts/gpu_session.sh build test"
if [ "$total_mib" -ge "$LIMIT_MIB" ]; then
  echo "gpu_pack: over ${LIMIT_MIB} MiB: the device call would be refused" >&2
  exit 1
fi
