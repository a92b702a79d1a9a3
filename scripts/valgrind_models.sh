#!/usr/bin/env bash
# One short training run (2 steps) of each model family (resnet, dranet, gpt, densenet; tiny sizes)
# under valgrind memcheck, on a Debug build without sanitizers. Each model trains twice,
# with the store-everything executor and through a plan (sqrt, activations streamed); every run must
# report no invalid access, no use of uninitialised values and no definite leak (--error-exitcode=1
# --errors-for-leak-kinds=definite). Over-reads by oneDNN's JIT code and by libcublasLt's start-up
# are suppressed by tests/valgrind.supp (the reasons are written there).
#
#   scripts/valgrind_models.sh [BUILD_DIR]     (default build-valgrind; configured and built if missing)
# OMP_WAIT_POLICY is set here: scorch-run otherwise re-executes /proc/self/exe to add it
# (tools/runtime_env.c), which under valgrind is the tool itself.
# Logs: BUILD_DIR/valgrind/<model>-<path>.log; a summary line per run on stdout. Exit 1 on any error.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-valgrind}
if [ ! -x "$build/scorch-run" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSCORCH_SANITIZE=OFF >/dev/null || exit 1
    ninja -C "$build" scorch-run >/dev/null || exit 1
fi
run=$build/scorch-run
out=$build/valgrind
mkdir -p "$out"
cd "$out" || exit 1
declare -A GEN=(
    [resnet]="resnet --depth 18 --width 4 --image 16 --classes 4"
    [dranet]="dranet --depth 50 --width 4 --image 16 --classes 4 --gamma 0.5"
    [gpt]="gpt --layers 1 --heads 2 --dim 16 --vocab 32 --seq 8"
    [densenet]="densenet --blocks 2 --layers-per-block 2 --growth 4 --image 16"
)
declare -A DIMS=([resnet]="--batch 2" [dranet]="--batch 2" [gpt]="--batch 2 --seq 8" [densenet]="--batch 2")
VG=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
    --error-exitcode=1 --track-origins=no --num-callers=30 -s --suppressions="$root/tests/valgrind.supp")
status=0
for model in resnet dranet gpt densenet; do
    "$run" gen ${GEN[$model]} -o "$model.onnx" >/dev/null || { echo "$model: gen failed"; status=1; continue; }
    for path in storeall plan; do
        extra=""
        [ "$path" = plan ] && extra="--strategy sqrt --offload activations"
        log=$model-$path.log
        OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 "${VG[@]}" --log-file="$log" "$run" train "$model.onnx" -o "$model.trained.onnx" \
            ${DIMS[$model]} --steps 2 --threads 2 --device cpu $extra >"$model-$path.out" 2>&1
        rc=$?
        errs=$(grep -m1 "ERROR SUMMARY" "$log" | sed 's/.*ERROR SUMMARY: //')
        leak=$(grep -m1 "definitely lost:" "$log" | sed 's/.*definitely lost: //')
        echo "$model $path: exit $rc; errors: $errs; definitely lost: ${leak:-0 (no leak summary: all freed)}"
        [ $rc -ne 0 ] && status=1
    done
done
exit $status
