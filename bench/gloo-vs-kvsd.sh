#!/bin/bash
# bench/gloo-vs-kvsd.sh - kvsd's socket path against Gloo in the same run:
# a 2-rank Gloo allreduce (bench/gloo/gloo_allreduce.cc, built here against
# Debian's libgloo-dev; TCP over 127.0.0.1; every algorithm, the best
# counts) and a 2-server x 2-worker kvsd pushpull with KVS_CMA=0 (every byte
# through ZeroMQ, as between hosts), both of BYTES of float32.  Beside them,
# bench/ps-floor.c: the loopback TCP floor of the round's bytes (a 2x2
# pushpull sends 4 x BYTES through TCP, the allreduce 1 x BYTES), so the
# output says how far kvsd is from what any parameter server could do here.
# The three alternate, REPS times; medians are compared.
# Skips with one line when g++ or libgloo-dev is missing.
# Environment: BUILD (build), BYTES (67108864), ITERS (10), REPS (3).
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BYTES=${BYTES:-67108864}
ITERS=${ITERS:-10}
REPS=${REPS:-3}
case "$BYTES$ITERS$REPS" in *[!0-9]*) echo "gloo-vs-kvsd: BYTES, ITERS and REPS are numbers" >&2; exit 2 ;; esac
if [ $((BYTES % 1048576)) -ne 0 ] || [ "$BYTES" -eq 0 ] || [ "$REPS" -lt 1 ] || [ "$ITERS" -lt 1 ]; then
    echo "gloo-vs-kvsd: BYTES must be a positive multiple of 1 MiB, ITERS and REPS >= 1" >&2
    exit 2
fi
if ! command -v g++ >/dev/null 2>&1 || [ ! -f /usr/include/gloo/allreduce_ring.h ]; then
    echo "gloo-vs-kvsd: skipped (needs g++ and libgloo-dev)"
    exit 0
fi
bin="$BUILD/gloo-allreduce"
if [ ! -x "$bin" ] || [ bench/gloo/gloo_allreduce.cc -nt "$bin" ]; then
    g++ -O2 -std=c++17 -o "$bin" bench/gloo/gloo_allreduce.cc -lgloo -pthread || exit 1
fi
cc -O2 -Wall -Wextra -o "$BUILD/ps-floor" bench/ps-floor.c || exit 1
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
. bench/lib.sh # median
gs="" fs="" ks=""
rep=1
while [ "$rep" -le "$REPS" ]; do
    rm -rf "${store:?}"/*
    "$bin" 1 2 "$store" "$BYTES" "$ITERS" > /dev/null &
    p1=$!
    gout=$("$bin" 0 2 "$store" "$BYTES" "$ITERS") || { wait; echo "gloo-vs-kvsd: gloo failed" >&2; exit 1; }
    wait $p1 || { echo "gloo-vs-kvsd: gloo rank 1 failed" >&2; exit 1; }
    echo "$gout"
    gs="$gs $(echo "$gout" | awk '{print $6}' | sort -g | head -1)"
    fout=$("$BUILD/ps-floor" $((4 * BYTES / 1048576)) "$ITERS") ||
        { echo "gloo-vs-kvsd: ps-floor failed" >&2; exit 1; }
    echo "$fout"
    fs="$fs $(echo "$fout" | tail -1 | sed -E 's/.*best ([0-9.]+) ms.*/\1/')"
    kout=$(KVS_BIN_DIR="$BUILD" bash deploy/kvs-launch -n 2 -s 2 --env KVS_CMA=0 -- \
           "$BUILD/kvs-bench" --sizes "$BYTES" --ops pushpull --iters "$ITERS" 2>&1 |
           grep -E "^\[worker 0\] [0-9]+[KMG]? +float32 +pushpull") ||
        { echo "gloo-vs-kvsd: kvsd run failed" >&2; exit 1; }
    echo "kvsd 2x2 KVS_CMA=0: ${kout#\[worker 0\] }"
    ks="$ks $(echo "$kout" | awk '{print $7}')"
    rep=$((rep + 1))
done
g=$(echo "$gs" | median)
f=$(echo "$fs" | median)
k=$(echo "$ks" | median)
awk -v k="$k" -v g="$g" -v f="$f" -v r="$REPS" 'BEGIN {
    printf "gloo-vs-kvsd: kvsd 2x2 pushpull %.1f ms vs Gloo best allreduce %.1f ms: %.2fx (target <= 1; medians of %d)\n", k, g, k / g, r
    printf "gloo-vs-kvsd: TCP floor of the 2x2 round'"'"'s bytes (ps-floor) %.1f ms: %.2fx Gloo (above 1: no parameter server meets the target on this machine); kvsd %.2fx that floor\n", f, f / g, k / f
}'
