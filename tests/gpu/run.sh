#!/bin/sh
# The one GPU check a GPU machine runs unattended: build (in parallel), run
# every check, print one line per check and a summary line
#   "gpu: N passed, N failed, N skipped (BACKEND, N devices, S s)".
# Exit 0 iff nothing failed.  Logs: $BUILD/gpu/*.log.
#
# Usage: tests/gpu/run.sh [--sim N] [--quick]
#   --sim N   swap the backend for N simulated devices: the same checks on
#             host memory and CPU sums (small sizes), so that this script's
#             own logic runs where there is no GPU;
#   --quick   small benchmark sizes, and the suites make test runs anyway
#             (device layer and stores, dist device jobs, Python) cut to a
#             sample: what make test runs (--sim 2 --quick).
#
# GPUs are counted through the CUDA runtime (kvs-gpucheck count), never
# nvidia-smi; a machine whose runtime sees none fails the "devices" check.
# Checks that need 2+ GPUs are listed as skipped, with the reason, on a
# one-GPU machine.  There several kvsd devices share GPU 0 (KVS_DEVICES=0,0,..):
# that runs the peer-copy (cudaMemcpyPeerAsync within one GPU), staged-copy,
# event and tree code paths and proves their calls, ordering and results;
# it does not prove peer access between two GPUs, link bandwidth, NCCL over
# several ranks, or topology detection.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SIM=0 QUICK=0
while [ $# -gt 0 ]; do
    case $1 in
        --sim) SIM=${2:-}; shift
            case $SIM in [1-9]|[1-9][0-9]) ;; *) echo "$0: --sim wants a device count 1..64" >&2; exit 2 ;; esac ;;
        --quick) QUICK=1 ;;
        *) echo "usage: $0 [--sim N] [--quick]" >&2; exit 2 ;;
    esac
    shift
done
JOBS=$(nproc 2>/dev/null || echo 2)
T0=$(date +%s)
LOGS="$BUILD/gpu"
mkdir -p "$LOGS"
unset KVS_TOPOLOGY KVS_DEVICES KVS_TEST_ONE_GPU KVS_TEST_CUDA
if [ "$SIM" -gt 0 ]; then
    export KVS_SIM_DEVICES="$SIM"
    targets="all $BUILD/test-unit $BUILD/tests/kvs-devworker $BUILD/tests/kvs-gpucheck \
             $BUILD/tests/libfakecuda.so"
else
    unset KVS_SIM_DEVICES
    targets="all gpu-test $BUILD/test-unit $BUILD/tests/kvs-devworker $BUILD/tests/kvs-gpucheck"
fi
# shellcheck disable=SC2086
make -s -j"$JOBS" BUILD="$BUILD" $targets > "$LOGS/build.log" 2>&1 \
    || { tail -30 "$LOGS/build.log"; echo "gpu: build failed (make -j$JOBS, $LOGS/build.log)"; exit 1; }

pass=0 fail=0 skip=0
# result NAME RC LOG SECONDS: one line; detail = the log's last line
result() {
    case $2 in
        0) r=PASS; pass=$((pass + 1)) ;;
        77) r=SKIP; skip=$((skip + 1)) ;;
        *) r=FAIL; fail=$((fail + 1)) ;;
    esac
    detail=$(grep -v '^[[:space:]]*$' "$3" 2>/dev/null | tail -1 | sed 's/^\(PASS\|FAIL\|SKIP\) //')
    printf '%-46s %-4s %6ss  %s\n' "$1" "$r" "$4" "$detail"
    [ "$r" = FAIL ] && tail -15 "$3" | sed 's/^/    | /'
    return 0
}
# check NAME COMMAND...: run it (its log: $LOGS/NAME.log), 0 pass, 77 skip
check() {
    name=$1; shift
    log="$LOGS/$(echo "$name" | tr -c 'A-Za-z0-9_\n-' '_').log"
    start=$(date +%s)
    "$@" > "$log" 2>&1
    rc=$?
    result "$name" "$rc" "$log" $(($(date +%s) - start))
}
# skipped NAME REASON
skipped() {
    log="$LOGS/$(echo "$1" | tr -c 'A-Za-z0-9_\n-' '_').log"
    echo "SKIP $2" > "$log"
    result "$1" 77 "$log" 0
}

ngpu=$("$BUILD/tests/kvs-gpucheck" count 2>/dev/null || echo 0)
backend=cuda; [ "$SIM" -gt 0 ] && backend=sim
printf '%-46s %-4s %7s  %s\n' CHECK RESULT TIME DETAIL
dlog="$LOGS/devices.log"
if [ "$ngpu" -ge 1 ]; then
    echo "$ngpu $backend device(s) through $([ "$SIM" -gt 0 ] && echo KVS_SIM_DEVICES=$SIM || echo the CUDA runtime)" > "$dlog"
    result "devices" 0 "$dlog" 0
else
    "$BUILD/tests/kvs-gpucheck" kernels > "$dlog" 2>&1 # its message says why
    result "devices" 1 "$dlog" 0
fi

if [ "$ngpu" -ge 1 ]; then
    # CUDA programs (kernels and tree executor against the CPU engine)
    for t in "$BUILD"/gpu/*; do
        [ -x "$t" ] && [ -f "$t" ] || continue
        case $t in *.log) continue ;; esac
        if [ "$SIM" -gt 0 ]; then
            skipped "cuda program $(basename "$t")" "a CUDA program: needs a GPU (--sim)"
        else
            check "cuda program $(basename "$t")" "$t"
        fi
    done
    G="$BUILD/tests/kvs-gpucheck"
    check "sum kernels vs copy bandwidth" "$G" kernels
    check "host copies, pool staging vs link" "$G" copies
    check "sum of > 2^31 elements" "$G" big
    check "misaligned, tails, NaN and Inf" "$G" edge
    check "peer, staged copies and events" "$G" paths
    # the stores (device flat/tree, local, nccl) on the devices
    if [ "$SIM" -gt 0 ]; then
        case=; [ "$QUICK" = 1 ] && case=layer
        check "device unit suite (simulated)" env CK_RUN_SUITE=device ${case:+CK_RUN_CASE=$case} \
            CK_DEFAULT_TIMEOUT=300 "$BUILD/test-unit"
        check "device code on a stand-in CUDA runtime" env CK_RUN_SUITE=cudafake \
            CK_DEFAULT_TIMEOUT=300 "$BUILD/test-unit"
    else
        check "device unit suite (distinct GPUs)" env KVS_TEST_CUDA=1 CK_RUN_SUITE=device \
            CK_RUN_CASE=store CK_DEFAULT_TIMEOUT=300 "$BUILD/test-unit"
        check "device unit suite (devices share GPU 0)" env KVS_TEST_CUDA=1 KVS_TEST_ONE_GPU=1 \
            CK_RUN_SUITE=device CK_RUN_CASE=store CK_DEFAULT_TIMEOUT=300 "$BUILD/test-unit"
    fi
    # dist_sync_device & co: worker processes sharing the devices
    if [ "$QUICK" = 1 ]; then
        skipped "dist device jobs (2+ workers share GPUs)" "--quick: make test runs tests/device"
    else
    check "dist device jobs (2+ workers share GPUs)" env KVS_DEVTEST_CUDA=$([ "$SIM" -gt 0 ] && echo 0 || echo 1) \
        KVS_DEVTEST_NGPU="$ngpu" BUILD="$BUILD" bash tests/device/test-dist-device.sh
    fi
    # kvs-bench device rows, every value checked by kvs-bench itself
    bench="$LOGS/bench-device.txt"
    # four kvsd devices on GPU 0 (simulated: the simulated devices)
    sel4=0,0,0,0 n4=4; [ "$SIM" -gt 0 ] && sel4= n4=$ngpu
    small=256K,4M,64M big=4M,64M
    [ "$QUICK" = 1 ] && small=256K big=256K
    # NCCL rows where libnccl is installed (as the unit suite, a skip otherwise)
    modes=flat,tree nccl="NCCL rows: none (libnccl.so.2 not installed)"
    if [ "$SIM" = 0 ] && ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
        modes=flat,tree,nccl nccl="NCCL rows included"
    fi
    [ "$SIM" -gt 0 ] && nccl="simulated devices: no NCCL rows"
    check "kvs-bench device rows" sh -c "
        set -e
        '$BUILD/kvs-bench' --store device --devices $ngpu --modes $modes --sizes $small > '$bench'
        KVS_DEVICES=$sel4 '$BUILD/kvs-bench' --store device --devices $n4 --modes flat,tree \
            --sizes $big >> '$bench'
        MXNET_ENABLE_GPU_P2P=0 KVS_DEVICES=$sel4 '$BUILD/kvs-bench' --store device --devices $n4 \
            --modes flat,tree --sizes $big >> '$bench'
        '$BUILD/kvs-bench' --store local --devices $ngpu --sizes $big >> '$bench'
        KVS_BIN_DIR='$BUILD' bash deploy/kvs-launch -n 2 -s 2 -- '$BUILD/kvs-bench' \
            --store dist_sync_device --devices $ngpu --sizes $big >> '$bench'
        cat '$bench'
        echo \"PASS \$(grep -c ' ok\$' '$bench') rows, every value checked; $nccl\""
    # the Python binding: torch CUDA tensors on a side stream
    if [ "$SIM" -gt 0 ]; then
        check "python: stream handshake (fakes)" env BUILD="$BUILD" sh tests/python/run.sh \
            -k "$([ "$QUICK" = 1 ] && echo torch_tensor_waits || echo 'stream or kvs_devices')"
    else
        check "python: torch tensors on a side stream" env KVS_LIBRARY="$BUILD/libkvs.so" \
            PYTHONPATH=python "${KVS_PYTHON:-/usr/bin/python3}" tests/gpu/torch_stream.py
    fi
fi

# what needs two GPUs or more
if [ "$ngpu" -lt 2 ]; then
    why="needs 2+ GPUs, $ngpu present"
    skipped "peer access between two GPUs" "$why"
    skipped "NCCL with 2+ ranks" "$why"
    skipped "trees over the detected link matrix" "$why"
    skipped "kvs-bench device rows across GPUs" "$why"
fi

echo "gpu: $pass passed, $fail failed, $skip skipped ($backend, $ngpu devices, $(($(date +%s) - T0)) s)"
[ "$fail" = 0 ]
