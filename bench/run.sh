#!/bin/sh
# make bench: the benchmarks recorded in bench/RESULTS.md.  Everything it
# prints also goes to OUT/last-run.txt, row by row as each is measured; the
# numbers behind the plots go to OUT/data/*.dat and the plots to
# OUT/plots/*.svg (bench/plot.sh, gnuplot).  OUT is BENCH_OUT, by default
# $BUILD/bench: a run never touches tracked files unless asked to
# (BENCH_OUT=bench writes over the recorded data and plots).  Run it on a
# quiet machine: every number here is CPU-bound on 2 cores.
#   BENCH_QUICK=1  small sizes and few keys only (a minute; for trying it out)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BENCH_OUT=${BENCH_OUT:-$BUILD/bench}
out=$BENCH_OUT/last-run.txt
data=$BENCH_OUT/data
mkdir -p "$data"
: > "$out"
# run LABEL CMD...: the command's rank-0 output, line by line as it comes, to
# the terminal, OUT/last-run.txt and OUT/data/LABEL.txt (the plots' input)
run() {
    label=$1; shift
    echo "\$ $*" | tee -a "$out"
    : > "$data/$label.txt"
    # other workers' rows and the daemons' INFO/WARN log lines are left out
    "$@" 2>&1 | grep --line-buffered -v -E '^\[worker [1-9]|^[0-9-]{10}T[0-9:.]{12}Z \[[a-z 0-9]*\] [^ ]* (INFO|WARN|DEBUG) ' |
        sed -u 's/^\[worker 0\] //' | tee -a "$out" "$data/$label.txt"
    echo | tee -a "$out"
}
export KVS_BIN_DIR="$BUILD"
launch="bash deploy/kvs-launch"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    sizes=4K,64K,1M keycounts="1 16 64" iters="--iters 20"
else
    sizes=4K,64K,256K,1M,4M,16M,64M keycounts="1 4 16 64 256 1024" iters=
fi
# the floor: raw ZeroMQ echo between two processes
run zmq "$BUILD/kvs-bench" zmq --sizes $sizes
# pushpull against push + pull (the target: <= 1 at every size and layout),
# from LABEL's rows (--interleave: the three ops' rounds alternate, so they
# are timed in the same seconds and cache state)
ppratio() {
    awk '$3 == "push" { p[$1] = $5 } $3 == "pull" { q[$1] = $5 }
         $3 == "pushpull" && ($1 in p) && ($1 in q) {
             r = $5 / (p[$1] + q[$1]); s = s sprintf(" %s %.2f", $1, r); if (r > 1) bad = bad " " $1 }
         END { printf "pushpull / (push + pull), %s:%s%s\n", L, s, bad ? "  (above 1:" bad ")" : "" }' \
        L="$1" "$data/$1.txt" | tee -a "$out"
    echo | tee -a "$out"
}
# kvsd, default (same-host direct copies for data >= 16 KiB)
run cma-1x1 $launch -n 1 -s 1 -- "$BUILD/kvs-bench" --sizes $sizes --interleave $iters
ppratio cma-1x1
run cma-2x2 $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --interleave $iters
ppratio cma-2x2
# kvsd with every byte through the sockets (as between hosts)
run sock-1x1 $launch -n 1 -s 1 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes $sizes --interleave $iters
ppratio sock-1x1
run sock-2x2 $launch -n 2 -s 2 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes $sizes --interleave $iters
ppratio sock-2x2
# a 4 KiB pushpull's p99 while 64 MiB rounds run (the target: under 2 ms
# with the default settings), 3 runs of each type and their median.  dist_async's
# small pushpulls (and its report) are worker 1's, so both workers' rows
# are kept here.
mixed() {
    label=$1; shift
    echo "\$ $*" | tee -a "$out"
    "$@" 2>&1 | grep --line-buffered -E '^\[worker [01]\] ' | sed -u 's/^\[worker [01]\] //' |
        tee -a "$out" "$data/$label.txt"
    echo | tee -a "$out"
}
if [ "${BENCH_QUICK:-0}" = 1 ]; then mixed_args="--big 16M --big-rounds 10 --small-ops 500"
else mixed_args="--big 64M --big-rounds 40 --small-ops 2000"; fi
for t in dist_sync dist_async; do
    for r in 1 2 3; do
        mixed "mixed-$t-$r" $launch -n 2 -s 1 -- "$BUILD/kvs-bench" mixed --type $t --small 4K $mixed_args
    done
    awk '/^during big rounds/ { print $(NF - 1) }' "$data/mixed-$t-1.txt" "$data/mixed-$t-2.txt" \
        "$data/mixed-$t-3.txt" | sort -n |
        awk -v t=$t '{ a[NR] = $1 } END { printf "4 KiB pushpull p99 beside big rounds, %s: %s %s %s ms, median %s (target: under 2)\n\n", t, a[1], a[2], a[3], a[2] }' |
        tee -a "$out"
done
# the reduction engine against memcpy (memcpy: the floor of any copy)
run reduce "$BUILD/kvs-bench" reduce --dtypes float32,float16,bfloat16 --sizes 256K,4M,64M --threads 1,2
run memcpy "$BUILD/kvs-bench" reduce --dtypes float32 --sizes $sizes --threads 1 --inputs 1 --json
# round time by key count: N keys of 64 KiB in one call, 2 workers, 2 servers
for n in $keycounts; do
    run "keys-$n" $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --keys "$n" --sizes 64K --no-ref --json
done
# many keys (one call per round, against one key of the same bytes), both
# data paths; huge key counts; model profiles in backward order
if [ "${BENCH_QUICK:-0}" != 1 ]; then
    for cma in 1 0; do
        run "keys200-cma$cma-1x1" $launch -n 1 -s 1 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M
        run "keys200-cma$cma-2x2" $launch -n 2 -s 2 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M
        # the same with rounds alternating with the reference key's (same minutes)
        run "keys200i-cma$cma-1x1" $launch -n 1 -s 1 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M --interleave
        run "keys200i-cma$cma-2x2" $launch -n 2 -s 2 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M --interleave
    done
    run keys100000 $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --keys 100000 --sizes 64 --iters 5 --no-ref
    run resnet50 $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --model resnet50 --iters 10
    run bert-base $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --model bert-base --iters 5
    # P3 under a 1 Gbit link between two network namespaces (root only)
    run p3-netns bash bench/p3-netns.sh
    # what the job secret costs: open vs auth vs curve (bench/security.sh)
    run security sh bench/security.sh
    # the socket path against a 2-rank Gloo allreduce in the same run
    run gloo-vs-kvsd bash bench/gloo-vs-kvsd.sh
    # the same against one worker + one server per host (two namespaces, root only)
    run colo-vs-gloo bash bench/colo-vs-gloo.sh
    # N hosts (namespaces, 1 Gbit; N=8 at 250 Mbit), one worker + one server
    # each: efficiency against the link bound, kvsd against Gloo (root only)
    run hosts env N="2 3 4 8" bash bench/hosts.sh
    # the socket path against the loopback TCP floor (1 MiB writes)
    run tcp-floor sh bench/tcp-floor.sh
    # direct copies against the memory floor (the copies and sums the round must do)
    run copy-floor sh bench/copy-floor.sh
    # server-side optimizers: one update next to one push's add, then whole jobs
    # (2 workers, 2 servers) with plain sums and with sgd momentum / adam updates
    run optim "$BUILD/kvs-bench" optim --sizes 256K,4M,64M --threads 1,2
    run optim-plain $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull
    run optim-sgd $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull \
        --optimizer "sgd learning_rate=0.01 momentum=0.9 wd=0.0001"
    run optim-adam $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull \
        --optimizer "adam learning_rate=0.001"
fi
# the tree planner on the example topologies
if [ -x "$BUILD/kvs-topo" ]; then
    "$BUILD/kvs-topo" plan --topologies tests/tree/examples.json --json > "$BUILD/trees.json" || true
    run trees "$BUILD/kvs-topo" score --topologies tests/tree/examples.json --trees "$BUILD/trees.json"
    # a row per machine family (ratio to the packing bound, ms) and the paced
    # simulator with one tree per root against weighted plans
    run planner sh bench/planner.sh
fi
# multi-device reduce + broadcast on 8 simulated devices (DGX-1 matrix):
# unpaced (host memory speed) and paced by the link weights
dgx1="0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0"
run dev-unpaced env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" "$BUILD/kvs-bench" --store device --devices 8 \
    --sizes 256K,4M,64M
# paced by the link weights; each run measures flat (merge buffer on one
# device) and the planned trees: the tree-vs-flat plot
run dev-paced env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" KVS_SIM_LINK_GBPS=0.1 "$BUILD/kvs-bench" \
    --store device --devices 8 --sizes 1M,4M,16M --iters 5
run dev-nop2p env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" KVS_SIM_LINK_GBPS=0.1 MXNET_ENABLE_GPU_P2P=0 \
    "$BUILD/kvs-bench" --store device --devices 8 --sizes 1M,4M,16M --iters 5
run dist-device $launch -n 2 -s 2 --env KVS_SIM_DEVICES=4 -- "$BUILD/kvs-bench" --store dist_sync_device \
    --devices 4 --sizes 256K,4M,64M
KEYCOUNTS="$keycounts" sh bench/plot.sh "$BENCH_OUT"
echo "bench: results in $out, plots in $BENCH_OUT/plots/"
