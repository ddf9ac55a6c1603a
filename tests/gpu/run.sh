#!/bin/sh
# GPU tests, unattended: build, run everything a GPU machine can show, print
# a table and one summary line "gpu: N passed, N failed, N skipped".
#  - every tests/gpu/*.cu program (exit 0 pass, 77 skip, else fail);
#  - the device unit suite on the CUDA devices (KVS_TEST_CUDA=1): local,
#    device flat/tree, nccl, P2P on/off, every dtype, bounds; cases needing
#    more GPUs than exist are skipped inside;
#  - tests/device/test-dist-device.sh on the CUDA devices (dist_sync_device,
#    dist_async_device, ... under kvs-launch);
#  - kvs-bench device rows (flat, tree, nccl; and dist_sync_device 2x2),
#    printed into $BUILD/gpu/bench-device.txt and checked exactly.
# Without a GPU (or nvcc) everything that needs one is skipped.
# Exit 0 if none failed.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
make -s BUILD="$BUILD" all gpu-test "$BUILD/test-unit" "$BUILD/tests/kvs-devworker" \
    || { echo "gpu: build failed"; exit 1; }
mkdir -p "$BUILD/gpu"
pass=0 fail=0 skip=0
printf '%-36s %-6s %s\n' TEST RESULT SECONDS
# record NAME RC LOG: 0 pass, 77 skip, else fail
record() {
    case $2 in
        0) r=PASS; pass=$((pass+1)) ;;
        77) r=SKIP; skip=$((skip+1)) ;;
        *) r=FAIL; fail=$((fail+1)) ;;
    esac
    printf '%-36s %-6s %.2f\n' "$1" "$r" "$(awk "BEGIN{print $end - $start}")"
    [ "$r" = FAIL ] && sed 's/^/    /' "$3" | tail -20
    return 0
}
for t in "$BUILD"/gpu/*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    start=$(date +%s.%N)
    "$t" > "$BUILD/gpu/$(basename "$t").log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    record "$(basename "$t")" $rc "$BUILD/gpu/$(basename "$t").log"
done

# the library's own device path on real GPUs
unset KVS_SIM_DEVICES KVS_TOPOLOGY
ngpu=0
command -v nvidia-smi >/dev/null 2>&1 && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
step() { # NAME COMMAND...: skipped without a GPU
    name=$1; shift
    log="$BUILD/gpu/$(echo "$name" | tr ' /' '__').log"
    start=$(date +%s.%N)
    if [ "$ngpu" -lt 1 ]; then
        rc=77; echo "no GPU" > "$log"
    else
        "$@" > "$log" 2>&1; rc=$?
    fi
    end=$(date +%s.%N)
    record "$name" $rc "$log"
}
step "device suite (CUDA)" env KVS_TEST_CUDA=1 CK_RUN_SUITE=device CK_DEFAULT_TIMEOUT=300 \
    "$BUILD/test-unit"
step "dist device jobs (CUDA)" env KVS_DEVTEST_CUDA=1 BUILD="$BUILD" \
    bash tests/device/test-dist-device.sh
bench="$BUILD/gpu/bench-device.txt"
step "kvs-bench device rows" sh -c "
    '$BUILD/kvs-bench' --store device --devices $ngpu --sizes 256K,4M,64M > '$bench' &&
    MXNET_ENABLE_GPU_P2P=0 '$BUILD/kvs-bench' --store device --devices $ngpu --modes flat,tree \
        --sizes 4M,64M >> '$bench' &&
    KVS_BIN_DIR='$BUILD' bash deploy/kvs-launch -n 2 -s 2 -- '$BUILD/kvs-bench' \
        --store dist_sync_device --devices $ngpu --sizes 4M,64M >> '$bench'"
[ -s "$bench" ] && sed 's/^/    /' "$bench"
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
