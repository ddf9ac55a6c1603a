#!/bin/sh
# The socket path against the loopback TCP floor (no iperf3 needed): builds
# bench/tcp-floor.c, measures 64 MiB in 1 MiB writes over 127.0.0.1, then a
# kvsd 1x1 64 MiB push with every byte through the sockets (KVS_CMA=0) in
# the same run, and prints the ratio (issue 10's target: >= 0.8 of the floor).
# The floor reuses one 1 MiB buffer on each end (always in cache); the same
# transfer from and into 64 MiB arrays (what kvsd moves) is printed beside
# it, with the ratio against it, for reference only.
#   ITERS=N  transfers / rounds (default 10)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ITERS=${ITERS:-10}
cc -O2 -Wall -Wextra -o "$BUILD/tcp-floor" bench/tcp-floor.c
floor=$("$BUILD/tcp-floor" 64 "$ITERS")
echo "$floor"
app=$("$BUILD/tcp-floor" 64 "$ITERS" app)
echo "$app"
export KVS_BIN_DIR="$BUILD"
row=$(bash deploy/kvs-launch -n 1 -s 1 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes 64M \
    --ops push --iters "$ITERS" 2>&1 | grep -E '^\[worker 0\] 64M ' | sed 's/^\[worker 0\] //')
echo "kvsd 1x1 KVS_CMA=0: $row"
fgbs=$(echo "$floor" | sed -E 's/.*, ([0-9.]+) GB\/s.*/\1/')
agbs=$(echo "$app" | sed -E 's/.*, ([0-9.]+) GB\/s.*/\1/')
kgbs=$(echo "$row" | awk '{print $7}')
echo "$kgbs $fgbs" | awk '{printf "kvsd push / TCP floor: %.2f (%s / %s GB/s)\n", $1 / $2, $1, $2}'
echo "$kgbs $agbs" | awk '{printf "kvsd push / TCP floor with 64 MiB arrays (reference): %.2f (%s / %s GB/s)\n", $1 / $2, $1, $2}'
