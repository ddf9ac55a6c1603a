#!/bin/sh
# make bench: the benchmarks recorded in bench/RESULTS.md.  Output also goes
# to bench/last-run.txt.
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
run bash deploy/kvs-launch -n 1 -s 1 -- "$BUILD/kvs-bench" --sizes 4K,256K,4M,64M
run bash deploy/kvs-launch -n 2 -s 2 -- "$BUILD/kvs-bench" --sizes 4K,256K,4M,64M
run "$BUILD/kvs-bench" reduce
if [ -x "$BUILD/kvs-topo" ] && [ -f ../shared/tree/examples.json ]; then
    run "$BUILD/kvs-topo" plan --topologies ../shared/tree/examples.json
fi
echo "bench: results in $out"
