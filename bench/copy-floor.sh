#!/bin/sh
# A same-host pushpull with direct copies against its memory floor: builds
# bench/copy-floor.c (the copies and sums a W x S pushpull of one key must
# do, with the servers' threads), then times kvsd's 64 MiB float32
# pushpull (KVS_CMA=1, the default) in 1x1 and 2x2, alternating with the
# floor REPS times, and prints the ratio of the medians (the target: <= 2).
# The load average is printed with every row: on a shared machine the
# figures mean little above a load of about 1.
#   ITERS=N  rounds per measurement (default 20)
#   REPS=N   alternating measurements of each (default 3)
#   SIZE=N   MiB (default 64)
#   LAYOUTS  "1x1 2x2" (default; WxS)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ITERS=${ITERS:-20}
REPS=${REPS:-3}
SIZE=${SIZE:-64}
LAYOUTS=${LAYOUTS:-"1x1 2x2"}
cc -O3 -Wall -Wextra -pthread -o "$BUILD/copy-floor" bench/copy-floor.c
export KVS_BIN_DIR="$BUILD"
. bench/lib.sh # median
load() { cut -d' ' -f1 /proc/loadavg; }
for lay in $LAYOUTS; do
    w=${lay%x*} s=${lay#*x}
    fl="" kv=""
    i=0
    while [ "$i" -lt "$REPS" ]; do
        floor=$("$BUILD/copy-floor" -w "$w" -s "$s" -i "$ITERS" "$SIZE")
        echo "$floor (load $(load))"
        row=$(bash deploy/kvs-launch -n "$w" -s "$s" -- "$BUILD/kvs-bench" --sizes "${SIZE}M" \
            --ops pushpull --iters "$ITERS" 2>&1 | grep -E '^\[worker 0\] [0-9]+M ' | sed 's/^\[worker 0\] //')
        echo "kvsd $lay KVS_CMA=1: $row (load $(load))"
        fl="$fl $(echo "$floor" | sed -E 's/.*: median ([0-9.]+) ms.*/\1/')"
        kv="$kv $(echo "$row" | awk '{print $5}')"
        i=$((i + 1))
    done
    f=$(echo "$fl" | median)
    k=$(echo "$kv" | median)
    echo "$k $f $REPS $lay $SIZE" | awk '{printf "kvsd %s %s MiB pushpull / copy floor: %.2f (%s / %s ms, medians of %d; target <= 2)\n", $4, $5, $1 / $2, $1, $2, $3}'
done
