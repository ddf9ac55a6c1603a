#!/bin/sh
# The socket path against the loopback TCP floor (no iperf3 needed): builds
# bench/tcp-floor.c, measures 64 MiB in 1 MiB writes over 127.0.0.1, then a
# kvsd 1x1 64 MiB push with every byte through the sockets (KVS_CMA=0) in
# the same run, and prints the ratio (the target: >= 0.8 of the floor).
# The floor reuses one 1 MiB buffer on each end (always in cache); the same
# transfer from and into 64 MiB arrays (what kvsd moves) is printed beside
# it, with the ratio against it, for reference only.
# On a shared 2-core machine either figure moves by 1.5x from one run to the
# next: the three are measured REPS times, alternating, and the medians of
# the REPS medians are compared.
#   ITERS=N  transfers / rounds per measurement (default 10)
#   REPS=N   alternating measurements of each (default 3)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ITERS=${ITERS:-10}
REPS=${REPS:-3}
cc -O2 -Wall -Wextra -o "$BUILD/tcp-floor" bench/tcp-floor.c
export KVS_BIN_DIR="$BUILD"
gbs() { sed -E 's/.*, ([0-9.]+) GB\/s.*/\1/'; }
. bench/lib.sh # median
fl="" ap="" kv=""
i=0
while [ "$i" -lt "$REPS" ]; do
    floor=$("$BUILD/tcp-floor" 64 "$ITERS")
    echo "$floor"
    app=$("$BUILD/tcp-floor" 64 "$ITERS" app)
    echo "$app"
    row=$(bash deploy/kvs-launch -n 1 -s 1 --env KVS_CMA=0 -- "$BUILD/kvs-bench" --sizes 64M \
        --ops push --iters "$ITERS" 2>&1 | grep -E '^\[worker 0\] 64M ' | sed 's/^\[worker 0\] //')
    echo "kvsd 1x1 KVS_CMA=0: $row"
    fl="$fl $(echo "$floor" | gbs)"
    ap="$ap $(echo "$app" | gbs)"
    kv="$kv $(echo "$row" | awk '{print $7}')"
    i=$((i + 1))
done
fgbs=$(echo "$fl" | median)
agbs=$(echo "$ap" | median)
kgbs=$(echo "$kv" | median)
echo "$kgbs $fgbs $REPS" | awk '{printf "kvsd push / TCP floor: %.2f (%s / %s GB/s, medians of %d)\n", $1 / $2, $1, $2, $3}'
echo "$kgbs $agbs $REPS" | awk '{printf "kvsd push / TCP floor with 64 MiB arrays (reference): %.2f (%s / %s GB/s, medians of %d)\n", $1 / $2, $1, $2, $3}'
