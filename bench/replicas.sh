#!/bin/sh
# bench/replicas.sh - what replicated servers cost without failures: the
# pushpull round of 2 workers x 3 servers on sockets (KVS_CMA=0) with
# KVS_REPLICAS=0 and 1, alternated RUNS times (default 3) so that both see
# the same machine; prints each run's medians and, per size, the median of
# the runs and the ratio replicas 1 / replicas 0.
#   sh bench/replicas.sh [RUNS]        (from the repository root, after make)
set -eu
. bench/lib.sh
runs=${1:-3}
sizes=4K,256K,1M,4M,16M,64M
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
    for r in 0 1; do
        deploy/kvs-launch -n 2 -s 3 --env KVS_CMA=0 --env KVS_REPLICAS=$r -- \
            build/kvs-bench --sizes $sizes --ops pushpull >"$tmp/out" 2>&1 || {
            cat "$tmp/out"
            exit 1
        }
        grep 'pushpull' "$tmp/out" | grep -v '^#' | awk -v r=$r -v i=$i \
            '{print "run " i " replicas " r ": " $3 " " $7 " ms"}'
        grep 'pushpull' "$tmp/out" | awk -v r=$r '{print $3, $7}' >>"$tmp/r$r"
    done
done
echo "size replicas0_ms replicas1_ms ratio (medians of $runs runs)"
for s in $(echo $sizes | tr ',' ' '); do
    a=$(awk -v s=$s '$1 == s {print $2}' "$tmp/r0" | median)
    b=$(awk -v s=$s '$1 == s {print $2}' "$tmp/r1" | median)
    echo "$s $a $b $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')"
done
