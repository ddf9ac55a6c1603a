#!/bin/bash
# bench/colo-vs-gloo.sh - kvsd in the layout MXNet / ps-lite / BytePS jobs run
# (one worker and one server on each host) against a 2-rank Gloo allreduce
# across the same two hosts, in the same run.  Two "hosts": network
# namespaces joined by a veth pair (unshaped unless RATE is set), each host
# also in its own pid namespace, so same-host direct copies (KVS_CMA) work
# within a host only: each worker's half for its own host's server is copied
# directly, the other half crosses the veth - 128 MiB through TCP per 64 MiB
# round, what a 2-rank ring allreduce moves.  Host A runs the scheduler,
# server 0 and worker 0; host B server 1 and worker 1 (DMLC_SERVER_ID /
# DMLC_WORKER_ID).  The script checks in the worker logs that each worker
# copies directly with its own host's server only.  REPS repetitions
# alternate Gloo (every algorithm, the best counts), kvsd (default) and,
# with SOCK=1, kvsd with KVS_CMA=0 everywhere; medians of the repetitions.
# This does not replace gloo-vs-kvsd.sh's sockets-only target (2x2 on one
# host, KVS_CMA=0); it adds the realistic layout beside it.
#
# Needs root, ip netns (iproute2), unshare (util-linux), g++ and libgloo-dev;
# exits 1 with a message without them.  Usage: bench/colo-vs-gloo.sh [--help]
# Environment: BUILD (build), SIZES (64M,4M), REPS (5), ITERS (10),
# SOCK (1), RATE (unset: no shaping; e.g. 10gbit: tbf each way), MTU (unset:
# the veth's default, 1500; e.g. 9000: jumbo frames).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh # median, pair_up, pair_del
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
SIZES=${SIZES:-64M,4M}
REPS=${REPS:-5}
ITERS=${ITERS:-10}
SOCK=${SOCK:-1}
RATE=${RATE:-}
MTU=${MTU:-}
die() { echo "colo-vs-gloo: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network and pid namespaces)"
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 || die "needs 'ip netns' (iproute2)"
command -v unshare >/dev/null 2>&1 || die "needs unshare (util-linux)"
unshare --help 2>&1 | grep -q -- --kill-child || die "needs unshare with --kill-child (util-linux >= 2.32)"
command -v g++ >/dev/null 2>&1 && [ -f /usr/include/gloo/allreduce_ring.h ] ||
    die "needs g++ and libgloo-dev (deploy/install-deps.sh)"
[[ $REPS =~ ^[1-9][0-9]*$ && $ITERS =~ ^[1-9][0-9]*$ ]] || die "REPS and ITERS must be positive integers"
[[ $SOCK == 0 || $SOCK == 1 ]] || die "SOCK must be 0 or 1"
[[ -z $MTU || $MTU =~ ^[1-9][0-9]{2,4}$ ]] || die "MTU must be a number of bytes (68-65535)"
for b in kvs-scheduler kvs-server kvs-bench; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing: run make"
done
gbin="$BUILD/gloo-allreduce"
if [ ! -x "$gbin" ] || [ bench/gloo/gloo_allreduce.cc -nt "$gbin" ]; then
    g++ -O2 -std=c++17 -o "$gbin" bench/gloo/gloo_allreduce.cc -lgloo -pthread || die "cannot build $gbin"
fi
# sizes as kvs-bench prints them (64M) and in bytes (for gloo-allreduce)
labels=() bytes=()
IFS=, read -r -a labels <<<"$SIZES"
for l in "${labels[@]}"; do
    [[ $l =~ ^([0-9]+)([KMG]?)$ ]] || die "SIZES: '$l' is not a size (4M, 65536, ...)"
    n=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in K) n=$((n << 10)) ;; M) n=$((n << 20)) ;; G) n=$((n << 30)) ;; esac
    ((n >= 4 && n % 4 == 0)) || die "SIZES: '$l' is not a whole number of float32"
    bytes+=("$n")
done

tag="kvco$$"
A="$tag-a" B="$tag-b"
IPA=10.214.0.1 IPB=10.214.0.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvs-colo.XXXXXX")
pids=""
trap "pair_cleanup colo-vs-gloo" EXIT
trap 'exit 130' INT TERM
pair_up "$RATE" 512kb "$MTU"

# One host's processes, run as pid 1 of the host's own pid namespace (its
# exit kills whatever of the host still runs).  Arguments: ID (0: host A,
# with the scheduler; 1: host B), RUN (log prefix), then VAR=VALUE... for
# every process.  Exit status: the worker's, or 1 if another process failed
# or outlived the worker by 30 s.
host_main='
id=$1 run=$2; shift 2
others=()
if [ "$id" = 0 ]; then
    env "$@" DMLC_ROLE=scheduler "$BUILD/kvs-scheduler" >"$dir/$run-scheduler.log" 2>&1 </dev/null &
    others+=($!)
fi
env "$@" DMLC_ROLE=server DMLC_SERVER_ID=$id "$BUILD/kvs-server" >"$dir/$run-server$id.log" 2>&1 </dev/null &
others+=($!)
env "$@" DMLC_ROLE=worker DMLC_WORKER_ID=$id "$BUILD/kvs-bench" --sizes "$SIZES" --ops pushpull \
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
export BUILD dir SIZES ITERS

# kvsd_run RUN CMA: one job across both hosts; prints worker 0's rows
kvsd_run() {
    local run=$1 cma=$2 pa pb ra rb
    local env=("DMLC_PS_ROOT_URI=$IPA" DMLC_PS_ROOT_PORT=9300 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2
               "KVS_CMA=$cma" KVS_START_TIMEOUT=60 PS_VERBOSE=1)
    ip netns exec "$A" unshare --pid --kill-child --mount-proc timeout 600 bash -c "$host_main" host-a \
        0 "$run" "${env[@]}" DMLC_NODE_HOST=$IPA 2>"$dir/$run-host-a.err" &
    pa=$!
    ip netns exec "$B" unshare --pid --kill-child --mount-proc timeout 600 bash -c "$host_main" host-b \
        1 "$run" "${env[@]}" DMLC_NODE_HOST=$IPB 2>"$dir/$run-host-b.err" &
    pb=$!
    pids="$pa $pb"
    wait $pa; ra=$?
    wait $pb; rb=$?
    pids=""
    if [ $ra != 0 ] || [ $rb != 0 ]; then
        echo "colo-vs-gloo: kvsd run $run failed (host A exit $ra, host B exit $rb):" >&2
        tail -n 5 "$dir/$run"-* >&2
        return 1
    fi
    grep -E "^[0-9]+[KMG]? +float32 +pushpull " "$dir/$run-worker0.log"
}

# check_paths RUN CMA: each worker copies directly with its own host's server
# only (CMA=1), or with none (CMA=0); the other pair goes through the sockets
check_paths() {
    local run=$1 cma=$2 w o f bad=0
    for w in 0 1; do
        o=$((1 - w)) f="$dir/$run-worker$w.log"
        if [ "$cma" = 1 ]; then
            grep -q "server $w copies our memory directly (same host)" "$f" || bad=1
            grep -q "server $o: socket data path" "$f" || bad=1
            grep -q "server $o copies our memory directly" "$f" && bad=1
            grep -q "worker $w (pid [0-9]*) proved it is on this host" "$dir/$run-server$w.log" || bad=1
            grep -q "worker $w (pid [0-9]*) proved it is on this host" "$dir/$run-server$o.log" && bad=1
        else
            grep -q "copies our memory directly" "$f" && bad=1
        fi
    done
    if [ $bad != 0 ]; then
        echo "colo-vs-gloo: run $run: the data paths are not the expected ones (KVS_CMA=$cma):" >&2
        grep -h -E "copies our memory|socket data path|proved it" "$dir/$run"-*.log >&2
        return 1
    fi
}

# gloo_run RUN BYTES: rank 0 on host A, rank 1 on host B; prints the best median
gloo_run() {
    local run=$1 n=$2 store="$dir/$1-store" p out
    mkdir -p "$store"
    ip netns exec "$B" timeout 600 "$gbin" 1 2 "$store" "$n" "$ITERS" $IPB >"$dir/$run-gloo1.log" 2>&1 &
    p=$!
    pids="$p"
    out=$(ip netns exec "$A" timeout 600 "$gbin" 0 2 "$store" "$n" "$ITERS" $IPA 2>"$dir/$run-gloo0.err")
    local r0=$? r1
    wait $p; r1=$?
    pids=""
    if [ $r0 != 0 ] || [ $r1 != 0 ] || ! grep -q " ok$" <<<"$out" || grep -q WRONG <<<"$out"; then
        echo "colo-vs-gloo: gloo run $run failed (rank 0 exit $r0, rank 1 exit $r1):" >&2
        echo "$out" >&2
        tail -n 5 "$dir/$run-gloo0.err" "$dir/$run-gloo1.log" >&2
        return 1
    fi
    awk '{print $6}' <<<"$out" | sort -g | head -1
}


variants="cma1"
[ "$SOCK" = 1 ] && variants="cma1 cma0"
echo "colo-vs-gloo: 2 hosts (network + pid namespaces, veth ${RATE:-unshaped}, MTU $(ip -n "$A" -o link show "$tag-va" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')); host A: scheduler, server 0, worker 0; host B: server 1, worker 1; Gloo: rank 0 on A, rank 1 on B; sizes $SIZES, $ITERS iterations, $REPS repetitions alternating"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rep  size   gloo_best_ms  kvsd_ms(KVS_CMA=1)$([ "$SOCK" = 1 ] && echo "  kvsd_ms(KVS_CMA=0)")"
declare -A G K
for ((r = 1; r <= REPS; r++)); do
    for i in "${!labels[@]}"; do
        G[$r,$i]=$(gloo_run "r$r-s$i" "${bytes[$i]}") || exit 1
    done
    for v in $variants; do
        rows=$(kvsd_run "r$r-$v" "${v#cma}") || exit 1
        check_paths "r$r-$v" "${v#cma}" || exit 1
        for i in "${!labels[@]}"; do
            ms=$(awk -v s="${labels[$i]}" '$1 == s && $9 == "ok" {print $5}' <<<"$rows")
            [ -n "$ms" ] || { echo "colo-vs-gloo: no checked $v row for ${labels[$i]}:" >&2; echo "$rows" >&2; exit 1; }
            K[$r,$v,$i]=$ms
        done
    done
    for i in "${!labels[@]}"; do
        printf "%-4s %-6s %12s  %18s" "$r" "${labels[$i]}" "${G[$r,$i]}" "${K[$r,cma1,$i]}"
        [ "$SOCK" = 1 ] && printf "  %18s" "${K[$r,cma0,$i]}"
        echo
    done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!labels[@]}"; do
    g=$(for ((r = 1; r <= REPS; r++)); do echo "${G[$r,$i]}"; done | median)
    k=$(for ((r = 1; r <= REPS; r++)); do echo "${K[$r,cma1,$i]}"; done | median)
    line=$(awk -v s="${labels[$i]}" -v k="$k" -v g="$g" 'BEGIN {
        printf "colo-vs-gloo: %s: kvsd 2x2 one worker + one server per host %.1f ms vs Gloo best 2-rank allreduce %.1f ms: %.2fx", s, k, g, k / g }')
    if [ "$SOCK" = 1 ]; then
        k0=$(for ((r = 1; r <= REPS; r++)); do echo "${K[$r,cma0,$i]}"; done | median)
        line+=$(awk -v k="$k0" -v g="$g" 'BEGIN { printf "; same layout KVS_CMA=0 %.1f ms: %.2fx", k, k / g }')
    fi
    echo "$line (medians of $REPS)"
done
