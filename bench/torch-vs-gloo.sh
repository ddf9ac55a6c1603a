#!/bin/bash
# bench/torch-vs-gloo.sh - kvsd.torch against PyTorch DDP (gloo), training
# the same model on the same shards (bench/torch_bench.py: an MLP with about
# 25 million float32 parameters, synthetic data, SGD with momentum), side by
# side in one run, in three layouts:
#   1host   2 workers and 2 servers on one host (loopback; gloo: 2 ranks)
#   10gbit  2 hosts: network + pid namespaces joined by a veth shaped to
#   1gbit   10 Gbit/s or 1 Gbit/s each way (tc tbf); host A runs the
#           scheduler, server 0 and worker 0, host B server 1 and worker 1
#           (KVS_CMA=$CMA: 0, the default, every byte through the sockets;
#           1: a worker and its own host's server use direct copies, as on
#           a real host, the pid namespaces keeping them from crossing
#           hosts); gloo: rank 0 on A, rank 1 on B
# and prints one line per layout and backend (samples per second over the
# timed steps, median of REPS runs) and a table; its last column is the
# median of the runs' own kvsd / gloo ratios (each pair ran back to back,
# gloo first in odd repetitions and kvsd first in even ones, so a machine
# whose speed drifts between runs moves both sides alike).  With OUT=FILE (make
# bench-python sets it) the whole output is also written there.
#
# Needs root, ip netns, tc, unshare and Debian's python3-torch; exits 1 with
# a message without them.  Usage: bench/torch-vs-gloo.sh [--help]
# Environment: BUILD (build), PYTHON3 (/usr/bin/python3), REPS (1),
# STEPS (4), WARMUP (1), BATCH (32), LAYOUTS (1host,10gbit,1gbit), CMA (0), OUT.
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh # median, pair_up, pair_del
ROOT=$PWD
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
PYTHON3=${PYTHON3:-/usr/bin/python3}
REPS=${REPS:-1} STEPS=${STEPS:-4} WARMUP=${WARMUP:-1} BATCH=${BATCH:-32}
LAYOUTS=${LAYOUTS:-1host,10gbit,1gbit}
CMA=${CMA:-0}
OUT=${OUT:-}
die() { echo "torch-vs-gloo: $*" >&2; exit 1; }
for v in REPS STEPS BATCH; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v='${!v}': expected a positive integer"
done
[[ $CMA == 0 || $CMA == 1 ]] || die "CMA='$CMA': expected 0 or 1"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP='$WARMUP': expected an integer >= 0"
IFS=, read -r -a layouts <<<"$LAYOUTS"
for l in "${layouts[@]}"; do
    case $l in 1host | 10gbit | 1gbit) ;; *) die "LAYOUTS: '$l': expected 1host, 10gbit or 1gbit" ;; esac
done
[ "$(id -u)" = 0 ] || die "needs root (network and pid namespaces)"
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 || die "needs 'ip netns' (iproute2)"
command -v tc >/dev/null 2>&1 || die "needs tc (iproute2)"
unshare --help 2>&1 | grep -q -- --kill-child || die "needs unshare with --kill-child (util-linux >= 2.32)"
"$PYTHON3" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    die "$PYTHON3 cannot import torch with gloo (python3-torch)"
for b in kvs-scheduler kvs-server libkvs.so; do
    [ -e "$BUILD/$b" ] || die "$BUILD/$b is missing: run make"
done
if [ -n "$OUT" ]; then
    mkdir -p "$(dirname "$OUT")" || die "cannot create the directory of OUT=$OUT"
    exec > >(tee "$OUT") 2>&1
fi
export KVS_LIBRARY=$BUILD/libkvs.so PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
BENCH=(bench/torch_bench.py --steps "$STEPS" --warmup "$WARMUP" --batch "$BATCH")

tag="kvtg$$"
A="$tag-a" B="$tag-b"
IPA=10.215.0.1 IPB=10.215.0.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvs-torch-bench.XXXXXX")
pids=""
trap "pair_cleanup torch-vs-gloo" EXIT
trap 'exit 130' INT TERM

# One host's kvsd processes, as pid 1 of its own pid namespace.  Arguments:
# ID (0: host A, with the scheduler), RUN (log prefix), VAR=VALUE...
host_main='
id=$1 run=$2; shift 2
others=()
if [ "$id" = 0 ]; then
    env "$@" DMLC_ROLE=scheduler "$BUILD/kvs-scheduler" >"$dir/$run-scheduler.log" 2>&1 </dev/null &
    others+=($!)
fi
env "$@" DMLC_ROLE=server DMLC_SERVER_ID=$id "$BUILD/kvs-server" >"$dir/$run-server$id.log" 2>&1 </dev/null &
others+=($!)
env "$@" DMLC_ROLE=worker DMLC_WORKER_ID=$id "$PYTHON3" "${BENCH[@]}" kvsd >"$dir/$run-worker$id.log" 2>&1 </dev/null
rc=$?
end=$((SECONDS + 30))
for p in "${others[@]}"; do
    while kill -0 $p 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    kill -0 $p 2>/dev/null && { echo "process $p still runs 30 s after the worker" >&2; exit 1; }
    wait $p || rc=1
done
exit $rc
'
export BUILD dir PYTHON3

result() { sed -n 's/.*RESULT .*samples_per_s=\([0-9.]*\).*/\1/p' "$1" | tail -1; }

fail() {
    echo "torch-vs-gloo: $1 failed; the last lines of its logs:" >&2
    shift
    tail -n 8 "$@" >&2
    return 1
}

# kvsd_run LAYOUT RUN: prints worker 0's samples/s
kvsd_run() {
    local layout=$1 run=$2 pa pb ra rb
    if [ "$layout" = 1host ]; then
        bash deploy/kvs-launch -n 2 -s 2 -- "$PYTHON3" "${BENCH[@]}" kvsd >"$dir/$run-worker0.log" 2>&1 ||
            { fail "kvsd $run" "$dir/$run-worker0.log"; return 1; }
    else
        local env=("DMLC_PS_ROOT_URI=$IPA" DMLC_PS_ROOT_PORT=9310 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2
                   KVS_CMA=$CMA KVS_START_TIMEOUT=120)
        local q; q=$(declare -p BENCH)
        ip netns exec "$A" unshare --pid --kill-child --mount-proc timeout 900 \
            bash -c "$q; $host_main" host-a 0 "$run" "${env[@]}" DMLC_NODE_HOST=$IPA 2>"$dir/$run-host-a.err" &
        pa=$!
        ip netns exec "$B" unshare --pid --kill-child --mount-proc timeout 900 \
            bash -c "$q; $host_main" host-b 1 "$run" "${env[@]}" DMLC_NODE_HOST=$IPB 2>"$dir/$run-host-b.err" &
        pb=$!
        pids="$pa $pb"
        wait $pa; ra=$?
        wait $pb; rb=$?
        pids=""
        [ $ra = 0 ] && [ $rb = 0 ] || { fail "kvsd $run (host A exit $ra, host B exit $rb)" "$dir/$run"-*; return 1; }
    fi
    result "$dir/$run-worker0.log"
}

# gloo_run LAYOUT RUN: prints rank 0's samples/s
gloo_run() {
    local layout=$1 run=$2 p r0 r1 a=127.0.0.1 na=() nb=() ifa=() ifb=()
    if [ "$layout" != 1host ]; then
        a=$IPA na=(ip netns exec "$A") nb=(ip netns exec "$B")
        ifa=(GLOO_SOCKET_IFNAME=$tag-va) ifb=(GLOO_SOCKET_IFNAME=$tag-vb)
    fi
    local port=$((29600 + RANDOM % 300))
    "${nb[@]}" env "${ifb[@]}" MASTER_ADDR=$a MASTER_PORT=$port WORLD_SIZE=2 RANK=1 timeout 900 \
        "$PYTHON3" "${BENCH[@]}" gloo >"$dir/$run-gloo1.log" 2>&1 &
    p=$!
    pids="$p"
    "${na[@]}" env "${ifa[@]}" MASTER_ADDR=$a MASTER_PORT=$port WORLD_SIZE=2 RANK=0 timeout 900 \
        "$PYTHON3" "${BENCH[@]}" gloo >"$dir/$run-gloo0.log" 2>&1
    r0=$?
    wait $p; r1=$?
    pids=""
    [ $r0 = 0 ] && [ $r1 = 0 ] || { fail "gloo $run (rank 0 exit $r0, rank 1 exit $r1)" "$dir/$run"-gloo*; return 1; }
    result "$dir/$run-gloo0.log"
}


echo "torch-vs-gloo: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, torch $("$PYTHON3" -c 'import torch; print(torch.__version__)')"
echo "model: MLP 1024-4096-4096-1024-10 (25.2 M float32 parameters), SGD momentum, batch $BATCH per worker, $WARMUP warm-up + $STEPS timed steps, 2 workers, $REPS repetition(s); samples/s of both workers together"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A K G R
for l in "${layouts[@]}"; do
    [ "$l" = 1host ] || pair_up "$l" 1mb
    ks=() gs=() rs=()
    for ((r = 1; r <= REPS; r++)); do
        # each pair back to back, who goes first alternating: whatever
        # the first run of a pair leaves behind (page cache, CPU clocks)
        # falls on both sides alike
        if ((r % 2)); then
            g=$(gloo_run "$l" "$l-r$r") || exit 1
            k=$(kvsd_run "$l" "$l-r$r") || exit 1
        else
            k=$(kvsd_run "$l" "$l-r$r") || exit 1
            g=$(gloo_run "$l" "$l-r$r") || exit 1
        fi
        [ -n "$g" ] && [ -n "$k" ] || die "$l: no RESULT line (gloo '$g', kvsd '$k')"
        echo "$l rep $r: gloo $g samples/s, kvsd $k samples/s (load $(cut -d' ' -f1 /proc/loadavg))"
        gs+=("$g") ks+=("$k") rs+=("$(awk -v g="$g" -v k="$k" 'BEGIN { printf "%.4f", k / g }')")
    done
    G[$l]=$(echo "${gs[@]}" | median)
    K[$l]=$(echo "${ks[@]}" | median)
    R[$l]=$(echo "${rs[@]}" | median)
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| layout | DDP gloo samples/s | kvsd.torch samples/s | kvsd / gloo | median of the runs' kvsd / gloo |"
echo "|---|---|---|---|---|"
for l in "${layouts[@]}"; do
    awk -v l="$l" -v g="${G[$l]}" -v k="${K[$l]}" -v r="${R[$l]}" \
        'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %.2fx |\n", l, g, k, k / g, r }'
done
