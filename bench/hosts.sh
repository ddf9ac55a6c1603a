#!/bin/bash
# bench/hosts.sh - kvsd on N hosts against Gloo's allreduce on the same
# hosts, at the wire: each host is a network and a pid namespace of its own
# with one worker and one server (host 0 also runs the scheduler), joined
# through a bridge (in a namespace of its own) by veth links shaped with tbf
# to RATE each way.  A 64 MiB float32 key: kvsd's push, pull and pushpull
# (kvs-bench --interleave: the three alternate round by round) and Gloo's
# allreduce (every algorithm; the best counts), alternating REPS times.
# Prints the table of the issue: the bound 2(N-1)/N x SIZE / RATE (what a
# host must send and receive in an allreduce, or a pushpull with one server
# per host; a push or a pull alone moves half of it), and bound / time
# (efficiency) for pushpull, push, pull and Gloo, medians of the REPS.  Also
# pushpull / (push + pull) (the target: <= 1), and the raw TCP floor of a
# push's bytes (bench/netns_flows.py, python3): every host sending to every
# other at once, as a parameter server's push does, and each to the next
# host only, as a ring does; nothing done to the bytes.
#
# Needs root, ip netns (iproute2), unshare (util-linux), tc, g++ and
# libgloo-dev; exits 1 with a message without them.  Usage:
#   bench/hosts.sh [--help]
# Environment: BUILD (build), N (host counts, "2 3 4"), RATE (1gbit; N
# above 4 uses RATE_BIG, 250mbit, so that 2 cores can drive the links),
# SIZE (64M), REPS (3), ITERS (5), KVS_ENV (extra VAR=VALUE for kvsd),
# FLOWS_EXTRA (more raw TCP schedules of a push's bytes to time in each
# repetition, from netns_flows.py: "staged rr paced"; each prints a line),
# PACED (1: each repetition also runs kvsd with KVS_LINK_GBPS set to the
# link's rate, and the raw flows paced likewise; their rows join the table).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
NS_LIST=${N:-"2 3 4"}
RATE=${RATE:-1gbit}
RATE_BIG=${RATE_BIG:-250mbit}
SIZE=${SIZE:-64M}
REPS=${REPS:-3}
ITERS=${ITERS:-5}
KVS_ENV=${KVS_ENV:-}
FLOWS_EXTRA=${FLOWS_EXTRA:-}
PACED=${PACED:-0}
die() { echo "hosts: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network and pid namespaces)"
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 || die "needs 'ip netns' (iproute2)"
command -v tc >/dev/null 2>&1 || die "needs tc (iproute2)"
unshare --help 2>&1 | grep -q -- --kill-child || die "needs unshare with --kill-child (util-linux >= 2.32)"
command -v g++ >/dev/null 2>&1 && [ -f /usr/include/gloo/allreduce_ring.h ] ||
    die "needs g++ and libgloo-dev (deploy/install-deps.sh)"
[[ $REPS =~ ^[1-9][0-9]*$ && $ITERS =~ ^[1-9][0-9]*$ ]] || die "REPS and ITERS must be positive integers"
[[ $PACED == 0 || $PACED == 1 ]] || die "PACED: '$PACED' is not 0 or 1"
for m in $FLOWS_EXTRA; do [[ $m =~ ^(staged|rr|paced)$ ]] || die "FLOWS_EXTRA: '$m' is not staged, rr or paced"; done
for n in $NS_LIST; do [[ $n =~ ^[0-9]+$ ]] && ((n >= 2 && n <= 16)) || die "N: '$n' is not 2 to 16"; done
[[ $SIZE =~ ^([0-9]+)([KMG]?)$ ]] || die "SIZE: '$SIZE' is not a size (64M, 4M, ...)"
bytes=${BASH_REMATCH[1]}
case ${BASH_REMATCH[2]} in K) bytes=$((bytes << 10)) ;; M) bytes=$((bytes << 20)) ;; G) bytes=$((bytes << 30)) ;; esac
((bytes >= 4 && bytes % 4 == 0)) || die "SIZE: '$SIZE' is not a whole number of float32"
for b in kvs-scheduler kvs-server kvs-bench; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing: run make"
done
gbin="$BUILD/gloo-allreduce"
if [ ! -x "$gbin" ] || [ bench/gloo/gloo_allreduce.cc -nt "$gbin" ]; then
    g++ -O2 -std=c++17 -o "$gbin" bench/gloo/gloo_allreduce.cc -lgloo -pthread || die "cannot build $gbin"
fi
# bits per second of a tc rate ("1gbit", "250mbit", "100kbit")
rate_bps() {
    [[ $1 =~ ^([0-9]+)(kbit|mbit|gbit|bit)$ ]] || return 1
    case ${BASH_REMATCH[2]} in bit) echo "${BASH_REMATCH[1]}" ;; kbit) echo $((BASH_REMATCH[1] * 1000)) ;;
        mbit) echo $((BASH_REMATCH[1] * 1000000)) ;; gbit) echo $((BASH_REMATCH[1] * 1000000000)) ;; esac
}
rate_bps "$RATE" >/dev/null && rate_bps "$RATE_BIG" >/dev/null || die "RATE, RATE_BIG: a tc rate (1gbit, 250mbit)"

tag="kvh$$"
BR="$tag-br"
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvs-hosts.XXXXXX")
pids="" hosts=0
cleanup() {
    local p i
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    for ((i = 0; i < hosts; i++)); do
        for p in $(ip netns pids "$tag-h$i" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$tag-h$i" 2>/dev/null
    done
    ip netns del "$BR" 2>/dev/null
    hosts=0
    [ "${KEEP:-0}" = 1 ] && echo "hosts: logs kept in $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# net_up N RATE: hosts h0..h(N-1) at 10.216.0.(i+1), each through a veth
# into the bridge, shaped to RATE both ways (tbf on each end's egress)
net_up() {
    local n=$1 rate=$2 i
    ip netns add "$BR" || die "cannot create network namespaces"
    ip -n "$BR" link add br0 type bridge && ip -n "$BR" link set br0 up && ip -n "$BR" link set lo up ||
        die "cannot create the bridge"
    for ((i = 0; i < n; i++)); do
        local h="$tag-h$i"
        ip netns add "$h" || die "cannot create network namespace $h"
        hosts=$((i + 1))
        ip link add "$tag-v$i" type veth peer name "$tag-p$i" || die "cannot create a veth pair"
        ip link set "$tag-v$i" netns "$h" name eth0 && ip link set "$tag-p$i" netns "$BR" || die "cannot move the veths"
        ip -n "$h" addr add "10.216.0.$((i + 1))/24" dev eth0 || die "addresses"
        ip -n "$h" link set lo up && ip -n "$h" link set eth0 up || die "links"
        ip -n "$BR" link set "$tag-p$i" master br0 && ip -n "$BR" link set "$tag-p$i" up || die "bridge port"
        ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst 512kb latency 50ms &&
            ip netns exec "$BR" tc qdisc add dev "$tag-p$i" root tbf rate "$rate" burst 512kb latency 50ms ||
            die "cannot shape the links to $rate"
    done
}

# One host's processes, as pid 1 of its own pid namespace.  Arguments: ID
# (0 also runs the scheduler), RUN (log prefix), VAR=VALUE... for every
# process.  Exit status: the worker's, or 1 if another process failed or
# outlived the worker by 30 s.
host_main='
id=$1 run=$2; shift 2
others=()
if [ "$id" = 0 ]; then
    env "$@" DMLC_ROLE=scheduler "$BUILD/kvs-scheduler" >"$dir/$run-scheduler.log" 2>&1 </dev/null &
    others+=($!)
fi
env "$@" DMLC_ROLE=server DMLC_SERVER_ID=$id "$BUILD/kvs-server" >"$dir/$run-server$id.log" 2>&1 </dev/null &
others+=($!)
env "$@" DMLC_ROLE=worker DMLC_WORKER_ID=$id "$BUILD/kvs-bench" --sizes "$SIZE" --interleave \
    --iters "$ITERS" >"$dir/$run-worker$id.log" 2>&1 </dev/null
rc=$?
[ $rc = 0 ] || exit $rc
end=$((SECONDS + 30))
for p in "${others[@]}"; do
    while kill -0 $p 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    kill -0 $p 2>/dev/null && { echo "process $p still runs 30 s after the worker" >&2; exit 1; }
    wait $p || rc=1
done
exit $rc
'
export BUILD dir SIZE ITERS

# wait_all PIDS: wait for every process of PIDS (killed by cleanup if the
# script is stopped meanwhile); status 1 if any failed
wait_all() {
    local p rc=0
    pids=$1
    for p in $1; do wait "$p" || rc=1; done
    pids=""
    return $rc
}

# kvsd_run N RUN [VAR=VALUE...]: one job over N hosts; prints worker 0's
# medians (ms) of its checked pushpull, push and pull rows
kvsd_run() {
    local n=$1 run=$2 i rc=0 ps=""
    local env=("DMLC_PS_ROOT_URI=10.216.0.1" DMLC_PS_ROOT_PORT=9300 "DMLC_NUM_SERVER=$n"
               "DMLC_NUM_WORKER=$n" KVS_START_TIMEOUT=120 PS_VERBOSE=1 $KVS_ENV "${@:3}")
    for ((i = 0; i < n; i++)); do
        ip netns exec "$tag-h$i" unshare --pid --kill-child --mount-proc timeout 900 bash -c "$host_main" \
            "host-$i" "$i" "$run" "${env[@]}" "DMLC_NODE_HOST=10.216.0.$((i + 1))" 2>"$dir/$run-host$i.err" &
        ps="$ps $!"
    done
    wait_all "$ps" || rc=1
    if [ $rc != 0 ]; then
        echo "hosts: kvsd run $run failed:" >&2
        tail -n 5 "$dir/$run"-* >&2
        return 1
    fi
    local rows a b c
    rows=$(grep -E "^$SIZE +float32 +(push|pull|pushpull) .* ok$" "$dir/$run-worker0.log")
    a=$(awk '$3 == "pushpull" {print $5}' <<<"$rows")
    b=$(awk '$3 == "push" {print $5}' <<<"$rows")
    c=$(awk '$3 == "pull" {print $5}' <<<"$rows")
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || { echo "hosts: kvsd run $run: no checked rows:" >&2; echo "$rows" >&2; return 1; }
    echo "$a $b $c"
}

# gloo_run N RUN: rank i on host i; prints the best algorithm's median (ms) and name
gloo_run() {
    local n=$1 run=$2 store="$dir/$2-store" i rc=0 ps="" out
    mkdir -p "$store"
    for ((i = 1; i < n; i++)); do
        ip netns exec "$tag-h$i" timeout 900 "$gbin" "$i" "$n" "$store" "$bytes" "$ITERS" \
            "10.216.0.$((i + 1))" >"$dir/$run-gloo$i.log" 2>&1 &
        ps="$ps $!"
    done
    pids=$ps
    out=$(ip netns exec "$tag-h0" timeout 900 "$gbin" 0 "$n" "$store" "$bytes" "$ITERS" 10.216.0.1 \
        2>"$dir/$run-gloo0.err") || rc=1
    wait_all "$ps" || rc=1
    # an algorithm that sums wrong for this rank count (bcube at 3) is left
    # out: its row says WRONG and the exit status is 1
    if ! grep -q " ok$" <<<"$out" || { [ $rc != 0 ] && ! grep -q WRONG <<<"$out"; }; then
        echo "hosts: gloo run $run failed:" >&2
        echo "$out" >&2
        tail -n 5 "$dir/$run"-gloo* >&2
        return 1
    fi
    awk '$NF == "ok" {print $6, $2}' <<<"$out" | sort -g | head -1
}

# flows_run N MODE: the raw TCP floor of a push's bytes in pattern MODE
# (bench/netns_flows.py: a2a, every host to every other at once; ring, each
# to the next); prints the last byte's arrival, ms from the common start
flows_run() {
    local n=$1 mode=$2 i rc=0 ps="" start
    start=$(python3 -c 'import time; print(time.time() + 2)')
    for ((i = 0; i < n; i++)); do
        LINK_BPS=$bps ip netns exec "$tag-h$i" timeout 120 python3 bench/netns_flows.py "$i" "$n" "$mode" "$start" \
            "$((bytes * (n - 1) / n))" >"$dir/flows-$mode-$i.log" 2>&1 &
        ps="$ps $!"
    done
    wait_all "$ps" || rc=1
    if [ $rc != 0 ]; then
        echo "hosts: the $mode flows failed:" >&2
        tail -n 3 "$dir"/flows-"$mode"-* >&2
        return 1
    fi
    awk '{print $6}' "$dir"/flows-"$mode"-*.log | sort -g | tail -1
}

. bench/lib.sh # median

for n in $NS_LIST; do
    rate=$RATE
    ((n > 4)) && rate=$RATE_BIG
    net_up "$n" "$rate"
    bps=$(rate_bps "$rate")
    bound=$(awk -v n="$n" -v b="$bytes" -v r="$bps" 'BEGIN { printf "%.1f", 2 * (n - 1) / n * b * 8 / r * 1000 }')
    echo "hosts: N=$n (network + pid namespaces, one worker + one server each, bridge, tbf $rate each way), $SIZE float32, $ITERS rounds, $REPS repetitions alternating; bound $bound ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rep  gloo_best_ms (algo)          kvsd_pushpull_ms  push_ms  pull_ms  tcp_a2a_ms  tcp_ring_ms  load"
    gl="" pp="" pu="" pl="" fa="" fr="" algos="" qp="" qu="" ql="" fp=""
    gbps=$(awk -v b="$bps" 'BEGIN { printf "%g", b / 1e9 }')
    for ((r = 1; r <= REPS; r++)); do
        g=$(gloo_run "$n" "n$n-r$r-gloo") || exit 1
        fa1=$(flows_run "$n" a2a) && fr1=$(flows_run "$n" ring) || exit 1
        for m in $FLOWS_EXTRA; do
            fx=$(flows_run "$n" "$m") || exit 1
            awk -v m="$m" -v t="$fx" -v bd="$bound" \
                'BEGIN { printf "     raw TCP %s: %s ms, efficiency %.2f\n", m, t, bd / 2 / t }'
        done
        abc=$(kvsd_run "$n" "n$n-r$r-kvsd") || exit 1
        read -r a b c <<<"$abc"
        printf "%-4s %-28s %17s %8s %8s %11s %12s  %s\n" "$r" "$g" "$a" "$b" "$c" "$fa1" "$fr1" \
            "$(cut -d' ' -f1 /proc/loadavg)"
        gl="$gl ${g%% *}" pp="$pp $a" pu="$pu $b" pl="$pl $c" fa="$fa $fa1" fr="$fr $fr1"
        if ((PACED)); then
            fp1=$(flows_run "$n" paced) || exit 1
            abc=$(kvsd_run "$n" "n$n-r$r-kvsdp" "KVS_LINK_GBPS=$gbps") || exit 1
            read -r a b c <<<"$abc"
            printf "%-4s %-28s %17s %8s %8s %11s %12s  %s\n" "" "paced (KVS_LINK_GBPS=$gbps)" "$a" "$b" "$c" "$fp1" "" \
                "$(cut -d' ' -f1 /proc/loadavg)"
            qp="$qp $a" qu="$qu $b" ql="$ql $c" fp="$fp $fp1"
        fi
        algos="$algos ${g#* }"
    done
    G=$(echo "$gl" | median) P=$(echo "$pp" | median) U=$(echo "$pu" | median) L=$(echo "$pl" | median)
    FA=$(echo "$fa" | median) FR=$(echo "$fr" | median)
    QP=0 QU=0 QL=0 FP=0
    if ((PACED)); then
        QP=$(echo "$qp" | median) QU=$(echo "$qu" | median) QL=$(echo "$ql" | median) FP=$(echo "$fp" | median)
    fi
    awk -v n="$n" -v bd="$bound" -v g="$G" -v p="$P" -v u="$U" -v l="$L" -v fa="$FA" -v fr="$FR" \
        -v qp="$QP" -v qu="$QU" -v ql="$QL" -v fp="$FP" -v gbps="$gbps" \
        -v rate="$rate" -v reps="$REPS" 'BEGIN {
        printf "| hosts (netns, %s, 1 worker + 1 server each), %s | %d |\n", rate, ENVIRON["SIZE"], n
        printf "|---|---|\n"
        printf "| bound 2(N-1)/N x size / link rate, ms | %.0f |\n", bd
        printf "| kvsd pushpull, efficiency (bound / time) | %.2f (%.1f ms) |\n", bd / p, p
        printf "| kvsd push alone / pull alone, efficiency | %.2f / %.2f |\n", bd / 2 / u, bd / 2 / l
        printf "| raw TCP, a push'"'"'s bytes: every host to every other at once / a ring, efficiency | %.2f / %.2f |\n", bd / 2 / fa, bd / 2 / fr
        printf "| Gloo best allreduce, efficiency | %.2f (%.1f ms) |\n", bd / g, g
        printf "| pushpull / (push + pull) | %.2f |\n", p / (u + l)
        if (qp > 0) {
            printf "| kvsd paced (KVS_LINK_GBPS=%s) pushpull, efficiency | %.2f (%.1f ms) |\n", gbps, bd / qp, qp
            printf "| kvsd paced push alone / pull alone, efficiency | %.2f / %.2f |\n", bd / 2 / qu, bd / 2 / ql
            printf "| raw TCP, a push'"'"'s bytes every host to every other at once, paced, efficiency | %.2f |\n", bd / 2 / fp
            printf "| paced pushpull / (push + pull) | %.2f |\n", qp / (qu + ql)
        }
        printf "(medians of %d)\n", reps }'
    echo "gloo's best per repetition:$algos"
    cleanup
    dir=$(mktemp -d "${TMPDIR:-/tmp}/kvs-hosts.XXXXXX")
done
