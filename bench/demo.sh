#!/bin/sh
# make demo: a local job (scheduler, 2 servers, 2 workers) running kvs-bench
# on a short size sweep; prints what it does and the table.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "demo: starting a local kvsd job: 1 scheduler, 2 servers, 2 workers (127.0.0.1)"
echo "demo: each worker runs $BUILD/kvs-bench: push, pull and pushpull of one float32 key"
echo "demo: of 4 KiB .. 16 MiB, every result checked against the exact sum of both workers"
echo "demo: command: deploy/kvs-launch -n 2 -s 2 -- $BUILD/kvs-bench --sizes 4K,64K,1M,16M"
echo
start=$(date +%s.%N)
KVS_BIN_DIR="$BUILD" bash deploy/kvs-launch -n 2 -s 2 -- \
    "$BUILD/kvs-bench" --sizes 4K,64K,1M,16M --iters 20 2>&1 |
    grep -v '^\[worker 1\]' | sed 's/^\[worker 0\] //'
end=$(date +%s.%N)
echo
echo "demo: job finished in $(awk "BEGIN{printf \"%.2f\", $end - $start}") s.  Columns: time of one round"
echo "demo: (median, p99) and GB/s moved per worker; agg_GB/s = all workers together."
echo "demo: more: make bench (writes $BUILD/bench/last-run.txt); how to read the columns: bench/README.md."
