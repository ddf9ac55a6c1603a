#!/bin/bash
# bench/compress-netns.sh - gradient compression over shaped links: a 2x2
# job on two "hosts" (network + pid namespaces joined by a veth pair shaped
# to RATE each way with tbf), one worker and one server on each host (host
# A also the scheduler), every byte through the sockets (KVS_CMA=0).  Each
# spec in SPECS runs kvs-bench on SIZE-byte float32 keys: push (a round's
# gradients summed on the servers) and pushpull (a whole round: push + the
# sum back, compressed too unless the spec says pull=0).  Prints the
# median ms of each op per spec and its speedup over "none".  The bytes each
# worker sent are its kvs_sent_bytes_total (kvs-bench prints them).
#
# Needs root, ip netns (iproute2) and unshare (util-linux); exits 1 with a
# message without them.  Usage: bench/compress-netns.sh [--help]
# Environment: BUILD (build), RATE (1gbit), SIZE (64M), ITERS (5),
# SPECS ("none|2bit threshold=0.5|1bit|topk ratio=0.01|fp16").
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh # median, pair_up, pair_del
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RATE=${RATE:-1gbit}
SIZE=${SIZE:-64M}
ITERS=${ITERS:-5}
SPECS=${SPECS:-none|2bit threshold=0.5|1bit|topk ratio=0.01|fp16}
die() { echo "compress-netns: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network and pid namespaces)"
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 || die "needs 'ip netns' (iproute2)"
unshare --help 2>&1 | grep -q -- --kill-child || die "needs unshare with --kill-child (util-linux >= 2.32)"
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "ITERS must be a positive integer"
[[ $SIZE =~ ^[0-9]+[KMG]?$ ]] || die "SIZE: '$SIZE' is not a size (64M, 4M, ...)"
for b in kvs-scheduler kvs-server kvs-bench; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing: run make"
done
tag="kvcz$$"
A="$tag-a" B="$tag-b"
IPA=10.215.0.1 IPB=10.215.0.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvs-compress.XXXXXX")
pids=""
trap "pair_cleanup compress-netns" EXIT
trap 'exit 130' INT TERM
pair_up "$RATE"

# One host's processes as pid 1 of its own pid namespace: ID (0: host A,
# with the scheduler), RUN (log prefix), SPEC, then VAR=VALUE... for every
# process.  Exit status: the worker's.
host_main='
id=$1 run=$2 spec=$3; shift 3
if [ "$id" = 0 ]; then
    env "$@" DMLC_ROLE=scheduler "$BUILD/kvs-scheduler" >"$dir/$run-scheduler.log" 2>&1 </dev/null &
fi
env "$@" DMLC_ROLE=server DMLC_SERVER_ID=$id "$BUILD/kvs-server" >"$dir/$run-server$id.log" 2>&1 </dev/null &
env "$@" DMLC_ROLE=worker DMLC_WORKER_ID=$id "$BUILD/kvs-bench" --sizes "$SIZE" --ops push,pushpull \
    --iters "$ITERS" --warmup 1 --compression "$spec" >"$dir/$run-worker$id.log" 2>&1 </dev/null
rc=$?
wait
exit $rc
'
export BUILD dir SIZE ITERS

# run_spec RUN SPEC: prints worker 0's rows
run_spec() {
    local run=$1 spec=$2 pa pb ra rb
    local env=("DMLC_PS_ROOT_URI=$IPA" DMLC_PS_ROOT_PORT=9400 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2
               KVS_CMA=0 KVS_START_TIMEOUT=60)
    ip netns exec "$A" unshare --pid --kill-child --mount-proc timeout 900 bash -c "$host_main" \
        host-a 0 "$run" "$spec" "${env[@]}" DMLC_NODE_HOST=$IPA 2>"$dir/$run-host-a.err" &
    pa=$!
    ip netns exec "$B" unshare --pid --kill-child --mount-proc timeout 900 bash -c "$host_main" \
        host-b 1 "$run" "$spec" "${env[@]}" DMLC_NODE_HOST=$IPB 2>"$dir/$run-host-b.err" &
    pb=$!
    pids="$pa $pb"
    wait $pa; ra=$?
    wait $pb; rb=$?
    pids=""
    if [ $ra != 0 ] || [ $rb != 0 ]; then
        echo "compress-netns: run '$spec' failed (host A exit $ra, host B exit $rb):" >&2
        tail -n 5 "$dir/$run"-* >&2
        return 1
    fi
    grep -E "^[0-9]+[KMG]? +float32 +(push|pushpull) " "$dir/$run-worker0.log"
}

echo "compress-netns: 2 hosts (network + pid namespaces, veth $RATE each way), a worker and a server on each, KVS_CMA=0; $SIZE float32 keys, $ITERS rounds"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-22s %12s %12s %10s %10s\n" spec push_ms pushpull_ms push_x pushpull_x
IFS='|' read -r -a specs <<<"$SPECS"
base_push="" base_pp=""
i=0
for spec in "${specs[@]}"; do
    rows=$(run_spec "r$i" "$spec") || exit 1
    i=$((i + 1))
    push=$(awk '$3 == "push" {print $5}' <<<"$rows")
    pp=$(awk '$3 == "pushpull" {print $5}' <<<"$rows")
    [ -n "$push" ] && [ -n "$pp" ] || { echo "compress-netns: no rows for '$spec':" >&2; echo "$rows" >&2; exit 1; }
    if [ -z "$base_push" ]; then base_push=$push base_pp=$pp; fi
    awk -v s="$spec" -v p="$push" -v q="$pp" -v bp="$base_push" -v bq="$base_pp" \
        'BEGIN { printf "%-22s %12.1f %12.1f %9.2fx %9.2fx\n", s, p, q, bp / p, bq / q }'
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
