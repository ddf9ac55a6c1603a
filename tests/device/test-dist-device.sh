#!/usr/bin/env bash
# Device store types in real jobs started by deploy/kvs-launch: 2 workers x
# 4 simulated devices x 2 servers (kvs-devworker checks every output).
# Usage: BUILD=build bash tests/device/test-dist-device.sh
# Ends with "devices: N passed, N failed"; exit 0 iff nothing failed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export KVS_BIN_DIR=$BUILD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-devtest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
# KVS_DEVTEST_CUDA=1 (tests/gpu/run.sh): the CUDA devices instead of simulated
# ones; jobs written for another device count are skipped.
CUDA=${KVS_DEVTEST_CUDA:-0}
# the GPUs the CUDA runtime sees (KVS_DEVTEST_NGPU: as run.sh counted them)
NGPU=0
[[ $CUDA == 1 ]] && NGPU=${KVS_DEVTEST_NGPU:-$("$BUILD/tests/kvs-gpucheck" count 2>/dev/null || echo 0)}

# job NAME WORKERS SERVERS DEVICES ENV... -- ARGS...
# With EXPECT=peer (or staged) every worker's device-to-device copies must all
# have been peer copies (or all staged): the counters of kvs_get_device_stats.
# With EXPECT=ipc every worker must have copied to or from another worker's
# device memory (a local group's sums meeting on the devices: CUDA IPC);
# EXPECT=ipc-trees: and planned trees across the processes (its log).
EXPECT=
# the ring of 4 devices for simulated ones (CUDA: the GPUs' own links)
SIMRING=
[[ $CUDA == 0 ]] && SIMRING="KVS_TOPOLOGY=0,1,0,1;1,0,1,0;0,1,0,1;1,0,1,0"
paths_ok() {
    local line peer staged ipc
    while read -r line; do
        peer=$(sed -E 's/.*peer ([0-9]+),.*/\1/' <<<"$line")
        staged=$(sed -E 's/.*staged ([0-9]+),.*/\1/' <<<"$line")
        ipc=$(sed -E 's/.*ipc ([0-9]+)\).*/\1/' <<<"$line")
        # on CUDA, peer access depends on the hardware (and 1 GPU copies nothing
        # between devices): only "no peer copy with P2P off" is certain
        case $EXPECT,$CUDA in
            peer,0) [[ $peer -gt 0 && $staged == 0 ]] || return 1 ;;
            staged,0) [[ $peer == 0 && $staged -gt 0 ]] || return 1 ;;
            staged,1) [[ $peer == 0 ]] || return 1 ;;
            ipc*,*) [[ $ipc -gt 0 ]] || return 1 ;;
        esac
    done < <(grep 'devworker [0-9]*: .*: ok' "$WORK/out")
    # EXPECT=ipc-trees: and the group planned its trees across the processes
    [[ $EXPECT != ipc-trees ]] || grep -q "trees over the members' devices" "$WORK/err"
}
job() {
    local name=$1 w=$2 s=$3 n=$4; shift 4
    local envs=() fixed=0
    while [[ $# -gt 0 && $1 != -- ]]; do
        envs+=(--env "$1"); [[ $1 == KVS_TOPOLOGY=* ]] && fixed=1; shift
    done
    shift
    if [[ $CUDA == 1 ]]; then
        # every GPU of the machine; a fixed topology needs its device count
        if [[ $fixed == 1 && $n != "$NGPU" ]] || [[ $NGPU -lt 1 ]]; then
            echo "skip - $name (needs $n GPUs, $NGPU present)"; return
        fi
        name="$name [CUDA, $NGPU GPUs]"
        n=
    fi
    timeout -s KILL 180 "$ROOT/deploy/kvs-launch" -n "$w" -s "$s" \
        ${n:+--env KVS_SIM_DEVICES="$n"} --env MXNET_KVSTORE_TREE_ARRAY_BOUND=600 \
        --env MXNET_KVSTORE_BIGARRAY_BOUND=1500 --env KVS_START_TIMEOUT=60 "${envs[@]}" \
        -- "$BUILD/tests/kvs-devworker" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
    local rc=$?
    local oks; oks=$(grep -c 'devworker [0-9]*: .*: ok' "$WORK/out")
    if [[ $rc == 0 && $oks == "$w" ]] && paths_ok; then
        pass=$((pass + 1)); echo "ok   - $name ($(grep -m1 'devworker 0:' "$WORK/out" | sed 's/.*devworker 0: //'))"
    else
        fail=$((fail + 1)); echo "FAIL - $name (exit $rc, $oks of $w workers ok)"
        sed 's/^/    | /' "$WORK/out" | tail -n 20
        sed 's/^/    ! /' "$WORK/err" | tail -n 20
    fi
}

EXPECT=peer
job "dist_sync_device 2x4x2 flat P2P"      2 2 4 -- --type dist_sync_device
EXPECT=staged
job "dist_sync_device 2x4x2 flat no P2P"   2 2 4 MXNET_ENABLE_GPU_P2P=0 -- --type dist_sync_device
EXPECT=peer
job "dist_device_sync 2x4x2 tree"          2 2 4 MXNET_KVSTORE_USETREE=1 -- --type dist_device_sync
EXPECT=staged
job "dist_sync_device 2x4x2 tree ring no P2P" 2 2 4 MXNET_KVSTORE_USETREE=1 MXNET_ENABLE_GPU_P2P=0 \
    "KVS_TOPOLOGY=0,1,0,1;1,0,1,0;0,1,0,1;1,0,1,0" -- --type dist_sync_device
EXPECT=
job "dist_sync (CPU sums) 2x4x2"           2 2 4 -- --type dist_sync
job "dist_async_device 2x4x2"              2 2 4 -- --type dist_async_device --async
job "dist_async (CPU sums) 2x3x1"          2 1 3 -- --type dist_async --async
# three workers on one host form a local group (docs/guide/local-groups.md):
# their simulated-device arrays join the group (dist_sync: each array's
# pinned host copy; dist_sync_device: each key's sum in the process, in
# device memory the members share), beside the group's aggregation of host
# arrays; sums exact
job "dist_sync (CPU sums) 3x2x2, one local group" 3 2 2 KVS_LOCAL_AGG=1 KVS_LOCAL_AGG_MIN=0 -- --type dist_sync --rounds 2
EXPECT=ipc
job "dist_sync_device 3x2x2, one local group" 3 2 2 KVS_LOCAL_AGG=1 KVS_LOCAL_AGG_MIN=0 -- --type dist_sync_device --rounds 2
job "dist_async_device 3x2x2, one local group" 3 2 2 KVS_LOCAL_AGG=1 KVS_LOCAL_AGG_MIN=0 -- --type dist_async_device --async --rounds 2
job "dist_sync_device 3x2x2, one local group, pushes overlapping" 3 2 2 KVS_LOCAL_AGG=1 KVS_LOCAL_AGG_MIN=0 -- --type dist_sync_device --rounds 5 --overlap
# one device per worker (LOCAL_RANK), as torchrun's one process per GPU:
# with trees, the members' sums go along trees over their GPUs (a ring of
# 4 simulated ones: every tree a path), exact sums
EXPECT=ipc-trees
job "dist_sync_device 4x1x2, one local group, a GPU each, trees across" 4 2 4 KVS_LOCAL_AGG=1 \
    KVS_LOCAL_AGG_MIN=0 MXNET_KVSTORE_USETREE=1 PS_VERBOSE=1 ${SIMRING:+"$SIMRING"} -- --type dist_sync_device \
    --rounds 3 --own-device
EXPECT=
EXPECT=peer
job "dist_sync_device 3x8x2 tree DGX-1"    3 2 8 MXNET_KVSTORE_USETREE=1 \
    "KVS_TOPOLOGY=0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0" \
    -- --type dist_sync_device --rounds 2

# Host staging in parts (dist_*_device, each worker pushing for itself:
# KVS_LOCAL_AGG=0): with KVS_CHUNK_BYTES=4096 a push's
# sum goes to the host one request (part or chunk) at a time, each leaving as
# soon as it is there, and each pulled part goes to the merge device as it
# arrives.  The device counters of the same job with default chunks (4 MiB:
# one request per part) and with 4 KiB chunks differ by exactly the extra
# requests: per push op 140 requests instead of 12 (6 dtypes x 20000
# elements in 2 parts of 10000, ceil(10000 x size / 4096) chunks each; the
# 37-element keys are 1 request either way), so 3 pushes (2 push + 1
# pushpull) make 3 x 128 more device-to-host copies and 4 pulls (after
# init, 2 after pushes, the pushpull) 4 x 128 more host-to-device ones.
counts() { grep -m1 'devworker 0:' "$WORK/out" | sed -E 's/.*h2d ([0-9]+), d2h ([0-9]+), ipc .*/\1 \2/'; }
if [[ $CUDA == 0 ]]; then
    EXPECT=
    job "dist_sync_device 2x4x2 flat, 4 MiB chunks" 2 2 4 KVS_LOCAL_AGG=0 -- \
        --type dist_sync_device --big 20000
    read -r h2d_whole d2h_whole < <(counts)
    job "dist_sync_device 2x4x2 flat, 4 KiB chunks" 2 2 4 KVS_LOCAL_AGG=0 KVS_CHUNK_BYTES=4096 -- \
        --type dist_sync_device --big 20000
    read -r h2d_part d2h_part < <(counts)
    if [[ $((d2h_part - d2h_whole)) == $((3 * 128)) && $((h2d_part - h2d_whole)) == $((4 * 128)) ]]; then
        pass=$((pass + 1)); echo "ok   - staging in parts: d2h $d2h_whole -> $d2h_part, h2d $h2d_whole -> $h2d_part"
    else
        fail=$((fail + 1)); echo "FAIL - staging in parts: d2h $d2h_whole -> $d2h_part (want +384), h2d $h2d_whole -> $h2d_part (want +512)"
    fi
    job "dist_sync_device 2x4x2 tree, 4 KiB chunks across slices" 2 2 4 MXNET_KVSTORE_USETREE=1 \
        KVS_CHUNK_BYTES=4096 -- --type dist_sync_device --big 20000
    job "dist_async_device 2x4x2, 4 KiB chunks" 2 2 4 KVS_CHUNK_BYTES=4096 -- \
        --type dist_async_device --async --big 20000
fi

echo "devices: $pass passed, $fail failed"
[[ $fail == 0 ]]
