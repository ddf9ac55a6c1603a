#!/bin/bash
# bench/p3-netns.sh - P3 under a bandwidth limit: two "hosts" (network
# namespaces joined by a veth pair shaped to RATE in each direction with tbf),
# the scheduler and one server on one, one worker on the other, every byte
# through the sockets (KVS_CMA=0).  The worker pushpulls LAYERS keys of BYTES
# each in backward order (last layer first, layer i with priority -i) with
# COMPUTE_MS of simulated compute before each, as a backward pass produces
# gradients; first_ms is when layer 0 (needed first by the next forward) is
# back, median_ms the whole round.  Run with DMLC_PS_VAN_TYPE=zmq and =p3.
#
# Needs root and `ip netns` (iproute2); otherwise it prints one "skipped"
# line and exits 0.  Usage: bench/p3-netns.sh [--help]
# Environment: BUILD (build), RATE (1gbit), LAYERS (20), BYTES (5000000),
# COMPUTE_MS (10), ITERS (5).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RATE=${RATE:-1gbit}
LAYERS=${LAYERS:-20}
BYTES=${BYTES:-5000000}
COMPUTE_MS=${COMPUTE_MS:-10}
ITERS=${ITERS:-5}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
    echo "p3-netns: skipped (needs root and ip netns)"
    exit 0
fi
for b in kvs-scheduler kvs-server kvs-bench; do
    [ -x "$BUILD/$b" ] || { echo "p3-netns: $BUILD/$b is missing: run make" >&2; exit 1; }
done
tag="kvp3$$"
A="$tag-a" B="$tag-b"
dir=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$A" && ip netns add "$B" || { echo "p3-netns: cannot create namespaces" >&2; exit 1; }
ip link add "$tag-va" type veth peer name "$tag-vb" || exit 1
ip link set "$tag-va" netns "$A"
ip link set "$tag-vb" netns "$B"
ip -n "$A" addr add 10.213.0.1/24 dev "$tag-va"
ip -n "$B" addr add 10.213.0.2/24 dev "$tag-vb"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$tag-va" up
ip -n "$B" link set "$tag-vb" up
# the link: RATE each way, a queue of at most 50 ms
ip netns exec "$A" tc qdisc add dev "$tag-va" root tbf rate "$RATE" burst 256kb latency 50ms || exit 1
ip netns exec "$B" tc qdisc add dev "$tag-vb" root tbf rate "$RATE" burst 256kb latency 50ms || exit 1

run_one() { # van -> prints the kvs-bench row
    local van=$1 port=9100
    local env=(env DMLC_PS_ROOT_URI=10.213.0.2 DMLC_PS_ROOT_PORT=$port DMLC_NUM_SERVER=1
               DMLC_NUM_WORKER=1 DMLC_PS_VAN_TYPE=$van KVS_CMA=0 KVS_START_TIMEOUT=30)
    ip netns exec "$B" "${env[@]}" DMLC_ROLE=scheduler DMLC_NODE_HOST=10.213.0.2 \
        "$BUILD/kvs-scheduler" >"$dir/sched-$van.log" 2>&1 &
    local sp=$!
    ip netns exec "$B" "${env[@]}" DMLC_ROLE=server DMLC_NODE_HOST=10.213.0.2 \
        "$BUILD/kvs-server" >"$dir/server-$van.log" 2>&1 &
    local vp=$!
    pids="$sp $vp"
    ip netns exec "$A" "${env[@]}" DMLC_ROLE=worker DMLC_NODE_HOST=10.213.0.1 \
        timeout 600 "$BUILD/kvs-bench" --keys "$LAYERS" --sizes "$BYTES" --order backward \
        --compute-ms "$COMPUTE_MS" --iters "$ITERS" --warmup 1 --no-ref >"$dir/worker-$van.log" 2>&1
    local rc=$?
    wait "$sp" 2>/dev/null
    wait "$vp" 2>/dev/null
    pids=""
    if [ $rc != 0 ]; then
        echo "p3-netns: the $van run failed (exit $rc):" >&2
        tail -5 "$dir"/*-"$van".log >&2
        return 1
    fi
    grep -E "^[0-9]+x[0-9]+ " "$dir/worker-$van.log"
}
echo "p3-netns: 1 worker, 1 server on two namespaces, $RATE each way (tbf); $LAYERS layers of $BYTES bytes, backward order, $COMPUTE_MS ms compute per layer, $ITERS rounds"
echo "van   keys op iters median_ms p99_ms first_ms GB/s x1key check"
zrow=$(run_one zmq) || exit 1
echo "zmq   $zrow"
prow=$(run_one p3) || exit 1
echo "p3    $prow"
zf=$(echo "$zrow" | awk '{print $6}') zm=$(echo "$zrow" | awk '{print $4}')
pf=$(echo "$prow" | awk '{print $6}') pm=$(echo "$prow" | awk '{print $4}')
awk -v zf="$zf" -v pf="$pf" -v zm="$zm" -v pm="$pm" 'BEGIN {
    printf "p3-netns: first layer back %.1f ms (zmq) vs %.1f ms (p3): %.2fx earlier (target >= 3x); round %.1f vs %.1f ms: %.3fx (target <= 1.05x)\n",
        zf, pf, zf / pf, zm, pm, pm / zm }'
