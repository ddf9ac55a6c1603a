#!/bin/sh
# bench/replicas.sh - what replicated servers cost without failures: the
# pushpull round of 2 workers x 3 servers on sockets (KVS_CMA=0) with
# KVS_REPLICAS=0 and 1, alternated RUNS times (default 3) so that both see
# the same machine; prints each run's medians and, per row, the median of
# the runs and the ratio replicas 1 / replicas 0.  Rows: one key of each
# size, then 64 MiB over many keys (64 keys of 1 MiB in one call:
# keys64x1M) and resnet50's 161 tensors, one call per tensor in backward
# order (resnet50).
#   sh bench/replicas.sh [RUNS]        (from the repository root, after make)
set -eu
. bench/lib.sh
runs=${1:-3}
sizes=4K,256K,1M,4M,16M,64M
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# job R ARGS...: a 2x3 job of kvs-bench ARGS with KVS_REPLICAS=R
job() {
    r=$1
    shift
    deploy/kvs-launch -n 2 -s 3 --env KVS_CMA=0 --env KVS_REPLICAS=$r -- \
        build/kvs-bench "$@" >"$tmp/out" 2>&1 || {
        cat "$tmp/out"
        exit 1
    }
}
for i in $(seq 1 "$runs"); do
    for r in 0 1; do
        job $r --sizes $sizes --ops pushpull
        grep 'pushpull' "$tmp/out" | grep -v '^#' | awk '{print $3, $7}' >"$tmp/rows"
        job $r --keys 64 --sizes 1M --no-ref
        grep "pushpull.* ok$" "$tmp/out" | awk '{print "keys64x1M", $6}' >>"$tmp/rows"
        job $r --model resnet50 --no-ref
        grep "pushpull.* ok$" "$tmp/out" | awk '{print "resnet50", $6}' >>"$tmp/rows"
        awk -v r=$r -v i=$i '{print "run " i " replicas " r ": " $1 " " $2 " ms"}' "$tmp/rows"
        cat "$tmp/rows" >>"$tmp/r$r"
    done
done
echo "size replicas0_ms replicas1_ms ratio (medians of $runs runs)"
for s in $(echo $sizes | tr ',' ' ') keys64x1M resnet50; do
    a=$(awk -v s=$s '$1 == s {print $2}' "$tmp/r0" | median)
    b=$(awk -v s=$s '$1 == s {print $2}' "$tmp/r1" | median)
    echo "$s $a $b $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')"
done
