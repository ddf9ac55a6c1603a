#!/bin/bash
# bench/local-groups.sh - local groups (docs/guide/local-groups.md) on
# namespace hosts: H hosts, each its own network AND pid namespace (ip netns
# exec NS unshare --pid --fork --mount-proc), joined by a bridge, egress of
# each shaped to RATE with tbf; one server per host, the scheduler on host 0,
# L workers per host running kvs-bench.  For L = 1 and L = $LS, one key of
# BYTES per worker and KEYS keys of BYTES/KEYS each, it records the median
# round of OPS (kvs-bench: across all workers, every value checked) and
# the bytes each host's eth0 sent and received during the job.
#
# Run it with a build of today's main (BUILD=...) and with this tree's to
# compare; the raw rows go to stdout (one line per run, key=value).
# Needs root, ip, tc, unshare; otherwise one "skipped" line and exit 0.
# Usage: bench/local-groups.sh [--help]
# Environment: BUILD (build), RATE (1gbit), H (2), LS (4), BYTES (64M),
# KEYS (200), ITERS (5), WARMUP (1), AGG (unset: the default; 0/1: KVS_LOCAL_AGG),
# ONLY ("one", "many": one of the two models), LIST (L values, default "1 $LS"),
# OPS (pushpull; or pull: plain pulls of the current value, or push: the
# median of the first op kvs-bench reports), PERF (a path prefix: perf
# record of each of host 0's workers at 499 Hz, to PERF.L<L>.<model>.w<id>).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RATE=${RATE:-1gbit} H=${H:-2} LS=${LS:-4} BYTES=${BYTES:-64M} KEYS=${KEYS:-200}
ITERS=${ITERS:-5} WARMUP=${WARMUP:-1} LIST=${LIST:-"1 $LS"} OPS=${OPS:-pushpull}
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
    echo "local-groups: skipped (needs root, unshare and ip netns)"
    exit 0
fi
for b in kvs-scheduler kvs-server kvs-bench; do
    [ -x "$BUILD/$b" ] || { echo "local-groups: $BUILD/$b is missing: run make" >&2; exit 1; }
done
bytes_of() { # "64M" -> bytes
    local v=${1%[KMG]} u=${1: -1}
    case $u in K) echo $((v << 10)) ;; M) echo $((v << 20)) ;; G) echo $((v << 30)) ;; *) echo "$1" ;; esac
}
B=$(bytes_of "$BYTES")
tag=kvlg$$
NSES=()
cleanup() {
    local ns p
    for ns in "${NSES[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    NSES=()
}
trap cleanup EXIT

netup() { # hosts h0..h$((H-1)) at 10.203.0.(10+h)
    ip netns add "$tag-br" && NSES+=("$tag-br")
    ip -n "$tag-br" link add br0 type bridge && ip -n "$tag-br" link set br0 up
    for ((h = 0; h < H; h++)); do
        local ns=$tag-h$h
        ip netns add "$ns" && NSES+=("$ns")
        ip -n "$ns" link add eth0 type veth peer name "v$h" netns "$tag-br"
        ip -n "$tag-br" link set "v$h" master br0 && ip -n "$tag-br" link set "v$h" up
        ip -n "$ns" addr add "10.203.0.$((10 + h))/24" dev eth0
        ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up
        ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 512kb latency 50ms
    done
}
netbytes() { # host -> tx+rx bytes of its eth0
    ip -n "$tag-h$1" -s link show eth0 | awk '/RX:/{getline; r=$1} /TX:/{getline; t=$1} END{printf "%.0f\n", r + t}'
}

run_one() { # L model(one|many)
    local L=$1 model=$2 dir W=$((H * $1)) h i w=0 args
    dir=$(mktemp -d)
    netup || { echo "local-groups: cannot build the namespaces" >&2; exit 1; }
    if [ "$model" = one ]; then
        args=(--sizes "$B" --ops "$OPS" --iters "$ITERS" --warmup "$WARMUP" --json)
    else
        args=(--keys "$KEYS" --sizes $((B / KEYS)) --ops "$OPS" --iters "$ITERS" --warmup "$WARMUP" --no-ref --json)
    fi
    local before=() after=()
    for ((h = 0; h < H; h++)); do before[h]=$(netbytes "$h"); done
    local t0=$(date +%s%N)
    for ((h = 0; h < H; h++)); do
        {
            echo "cd $dir"
            echo "export DMLC_PS_ROOT_URI=10.203.0.10 DMLC_NUM_SERVER=$H DMLC_NUM_WORKER=$W DMLC_NODE_HOST=10.203.0.$((10 + h))"
            echo "export PS_HEARTBEAT_TIMEOUT=120 KVS_START_TIMEOUT=120 ${AGG:+KVS_LOCAL_AGG=$AGG}"
            [ "$h" = 0 ] && echo "DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE=$dir/port $BUILD/kvs-scheduler >sched.log 2>&1 &"
            echo 'for i in $(seq 600); do [ -s port ] && break; sleep 0.05; done; export DMLC_PS_ROOT_PORT=$(cat port)'
            echo "DMLC_ROLE=server DMLC_SERVER_ID=$h $BUILD/kvs-server >s$h.log 2>&1 &"
            for ((i = 0; i < L; i++, w++)); do
                local prof=
                [ -n "${PERF:-}" ] && [ "$h" = 0 ] && prof="perf record -q -F 499 -o $PERF.L$L.$model.w$w --"
                echo "DMLC_ROLE=worker DMLC_WORKER_ID=$w $prof $BUILD/kvs-bench ${args[*]} >w$w.out 2>w$w.log &"
            done
            echo wait
        } >"$dir/host$h.sh"
        ip netns exec "$tag-h$h" unshare --pid --fork --mount-proc bash "$dir/host$h.sh" &
    done
    wait
    local t1=$(date +%s%N)
    for ((h = 0; h < H; h++)); do after[h]=$(netbytes "$h"); done
    local med ok
    med=$(grep -ho '"median_ms": [0-9.]*' "$dir/w0.out" | head -n 1 | cut -d' ' -f2)
    ok=$(grep -c '"ok": true' "$dir/w0.out")
    printf 'H=%s L=%s model=%s ops=%s bytes_per_worker=%s keys=%s rate=%s agg=%s build=%s median_round_ms=%s checks_ok=%s' \
        "$H" "$L" "$model" "$OPS" "$B" "$([ "$model" = one ] && echo 1 || echo "$KEYS")" "$RATE" "${AGG:-default}" \
        "$BUILD" "${med:-FAILED}" "$ok"
    for ((h = 0; h < H; h++)); do printf ' host%s_net_bytes=%s' "$h" $((after[h] - before[h])); done
    printf ' rounds=%s wall_s=%s\n' $((ITERS + WARMUP)) $(((t1 - t0) / 1000000000))
    [ -n "${med:-}" ] || { echo "--- w0 ---"; tail -5 "$dir/w0.log" "$dir/w0.out"; } >&2
    cleanup
    rm -rf "$dir"
}

for L in $LIST; do
    for m in ${ONLY:-one many}; do run_one "$L" "$m"; done
done
