#!/bin/sh
# make bench: the benchmarks recorded in bench/RESULTS.md.  Everything it
# prints also goes to bench/last-run.txt.  Run it on a quiet machine: every
# number here is CPU-bound on 2 cores.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=bench/last-run.txt
: > "$out"
run() {
    echo "\$ $*" | tee -a "$out"
    "$@" 2>&1 | grep -v '^\[worker [1-9]' | sed 's/^\[worker 0\] //' | tee -a "$out"
    echo | tee -a "$out"
}
export KVS_BIN_DIR="$BUILD"
launch="bash deploy/kvs-launch"
sizes=4K,256K,4M,64M
# the floor: raw ZeroMQ echo between two processes
run "$BUILD/kvs-bench" zmq --sizes $sizes
# kvsd, default (same-host direct copies for data >= 64 KiB)
run $launch -n 1 -s 1 -- "$BUILD/kvs-bench" --sizes $sizes
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes
# kvsd with every byte through the sockets (as between hosts)
run $launch -n 1 -s 1 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull
run $launch -n 2 -s 2 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull
# many keys (one call per round, against one key of the same bytes), both
# data paths; huge key counts; model profiles in backward order
for cma in 1 0; do
    run $launch -n 1 -s 1 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M
    run $launch -n 2 -s 2 --env KVS_CMA=$cma -- "$BUILD/kvs-bench" --keys 200 --sizes 4K-1M
done
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --keys 100000 --sizes 64 --iters 5 --no-ref
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --model resnet50 --iters 10
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --model bert-base --iters 5
# P3 under a 1 Gbit link between two network namespaces (root only)
run bash bench/p3-netns.sh
# what the job secret costs: open vs auth vs curve (bench/security.sh)
run sh bench/security.sh
# the socket path against a 2-rank Gloo allreduce in the same run
run bash bench/gloo-vs-kvsd.sh
# the reduction engine against memcpy
run "$BUILD/kvs-bench" reduce --dtypes float32,float16,bfloat16 --sizes 256K,4M,64M --threads 1,2
# server-side optimizers: one update next to one push's add, then whole jobs
# (2 workers, 2 servers) with plain sums and with sgd momentum / adam updates
run "$BUILD/kvs-bench" optim --sizes 256K,4M,64M --threads 1,2
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull \
    --optimizer "sgd learning_rate=0.01 momentum=0.9 wd=0.0001"
run $launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes $sizes --ops pushpull \
    --optimizer "adam learning_rate=0.001"
# the tree planner on the example topologies
if [ -x "$BUILD/kvs-topo" ]; then
    "$BUILD/kvs-topo" plan --topologies tests/tree/examples.json --json > "$BUILD/trees.json" || true
    run "$BUILD/kvs-topo" score --topologies tests/tree/examples.json --trees "$BUILD/trees.json"
fi
# multi-device reduce + broadcast on 8 simulated devices (DGX-1 matrix):
# unpaced (host memory speed) and paced by the link weights
dgx1="0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0"
run env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" "$BUILD/kvs-bench" --store device --devices 8 \
    --sizes 256K,4M,64M
run env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" KVS_SIM_LINK_GBPS=0.1 "$BUILD/kvs-bench" \
    --store device --devices 8 --sizes 1M,4M,16M --iters 5
run env KVS_SIM_DEVICES=8 KVS_TOPOLOGY="$dgx1" KVS_SIM_LINK_GBPS=0.1 MXNET_ENABLE_GPU_P2P=0 \
    "$BUILD/kvs-bench" --store device --devices 8 --sizes 1M,4M,16M --iters 5
run $launch -n 2 -s 2 --env KVS_SIM_DEVICES=4 -- "$BUILD/kvs-bench" --store dist_sync_device \
    --devices 4 --sizes 256K,4M,64M
echo "bench: results in $out"
