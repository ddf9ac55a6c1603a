#!/bin/bash
# bench/gloo-vs-kvsd.sh - kvsd's socket path against Gloo in the same run:
# a 2-rank Gloo allreduce (bench/gloo/gloo_allreduce.cc, built here against
# Debian's libgloo-dev; TCP over 127.0.0.1; every algorithm, the best
# counts) and a 2-server x 2-worker kvsd pushpull with KVS_CMA=0 (every byte
# through ZeroMQ, as between hosts), both of BYTES of float32.
# Skips with one line when g++ or libgloo-dev is missing.
# Environment: BUILD (build), BYTES (67108864), ITERS (10).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BYTES=${BYTES:-67108864}
ITERS=${ITERS:-10}
if ! command -v g++ >/dev/null 2>&1 || [ ! -f /usr/include/gloo/allreduce_ring.h ]; then
    echo "gloo-vs-kvsd: skipped (needs g++ and libgloo-dev)"
    exit 0
fi
bin="$BUILD/gloo-allreduce"
if [ ! -x "$bin" ] || [ bench/gloo/gloo_allreduce.cc -nt "$bin" ]; then
    g++ -O2 -std=c++17 -o "$bin" bench/gloo/gloo_allreduce.cc -lgloo -pthread || exit 1
fi
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
"$bin" 1 2 "$store" "$BYTES" "$ITERS" > /dev/null &
p1=$!
gout=$("$bin" 0 2 "$store" "$BYTES" "$ITERS") || { wait; echo "gloo-vs-kvsd: gloo failed" >&2; exit 1; }
wait $p1 || { echo "gloo-vs-kvsd: gloo rank 1 failed" >&2; exit 1; }
echo "$gout"
best=$(echo "$gout" | awk '{print $6}' | sort -g | head -1)
kout=$(KVS_BIN_DIR="$BUILD" bash deploy/kvs-launch -n 2 -s 2 --env KVS_CMA=0 -- \
       "$BUILD/kvs-bench" --sizes "$BYTES" --ops pushpull --iters "$ITERS" 2>&1 |
       grep -E "^\[worker 0\] [0-9]+[KMG]? +float32 +pushpull") ||
    { echo "gloo-vs-kvsd: kvsd run failed" >&2; exit 1; }
echo "kvsd 2x2 KVS_CMA=0: ${kout#\[worker 0\] }"
kms=$(echo "$kout" | awk '{print $7}')
awk -v k="$kms" -v g="$best" 'BEGIN { printf "gloo-vs-kvsd: kvsd 2x2 pushpull %.1f ms vs Gloo best allreduce %.1f ms: %.2fx (target <= 1)\n", k, g, k / g }'
