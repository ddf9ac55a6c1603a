#!/bin/sh
# bench/security.sh - what the job secret costs: kvs-bench pushpull rounds
# (median ms, worker 0) of an open job (--insecure), KVS_SECURITY=auth and
# KVS_SECURITY=curve; 4 KiB, 4 MiB, 64 MiB; 1x1 and 2x2; every byte through
# the sockets (KVS_CMA=0, as between two hosts) and the default (same-host
# direct copies).  The three modes alternate, REPS times (default 3), and
# the table shows the median of the REPS medians: this is a shared 2-core
# machine.  Prints a markdown table (bench/RESULTS.md, "Security").
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REPS=${REPS:-3}
export KVS_BIN_DIR="$BUILD"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rep in $(seq "$REPS"); do
    for cma in 0 1; do
        for topo in 1 2; do
            for mode in open auth curve; do
                case $mode in
                    open) sec=--insecure ;;
                    *) sec="--env KVS_SECURITY=$mode" ;;
                esac
                # shellcheck disable=SC2086
                bash deploy/kvs-launch -n "$topo" -s "$topo" $sec --env KVS_CMA=$cma -- \
                    "$BUILD/kvs-bench" --sizes 4K,4M,64M --ops pushpull 2>/dev/null |
                    sed -n 's/^\[worker 0\] //p' |
                    awk -v k="$cma $topo $mode" '$3 == "pushpull" { print k, $1, $5 }' \
                    >>"$tmp/all"
            done
        done
    done
done
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
get() { awk -v k="$1 $2 $3" -v s="$4" '$1" "$2" "$3 == k && $4 == s { print $5 }' "$tmp/all" | med; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a == 0) print "-"; else printf "%+.1f%%", (b / a - 1) * 100 }'; }
echo "| data path | workers x servers | size | open ms | auth ms (cost) | curve ms (cost) |"
echo "|---|---|---|---|---|---|"
for cma in 0 1; do
    for topo in 1 2; do
        for size in 4K 4M 64M; do
            o=$(get "$cma" "$topo" open "$size")
            a=$(get "$cma" "$topo" auth "$size")
            c=$(get "$cma" "$topo" curve "$size")
            path=$([ "$cma" = 0 ] && echo sockets || echo "direct copies")
            echo "| $path | ${topo}x$topo | $size | $o | $a ($(pct "$o" "$a")) | $c ($(pct "$o" "$c")) |"
        done
    done
done
