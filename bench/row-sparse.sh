#!/bin/bash
# bench/row-sparse.sh: an embedding table as a row-sparse key against the
# same table as a dense key, 2 workers and 1 server on loopback.
#   ROWS=10M COLS=64 TOUCH=10000 STEPS=50 DENSE=3 bench/row-sparse.sh
# Three jobs: (1) row-sparse steps with plain sums, (2) the same with a
# server optimizer (sgd momentum: one state array), (3) dense rounds.  For
# (1) and (2) it samples the server's resident memory (VmRSS, /proc) from the
# end of the init on, and prints the most seen next to the table's size:
# one copy of the table, plus one per optimizer state array.  Then the
# ratio of the dense round to the row-sparse step (p50 of worker 0).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ROWS=${ROWS:-10M} COLS=${COLS:-64} TOUCH=${TOUCH:-10000} STEPS=${STEPS:-50} DENSE=${DENSE:-3}
# a loaded machine can keep a server's loop busy past the default 60 s while
# it stores a table of gigabytes (the init, a dense round)
HEARTBEAT=${HEARTBEAT:-600}
export PATH=$BUILD:$PATH KVS_BIN_DIR=$BUILD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run NAME ARGS...: a job of kvs-bench rowsparse ARGS; its log in $out/NAME.log;
# prints the server's largest VmRSS (MiB) after the table was initialised
run() {
    local name=$1; shift
    bash "$ROOT/deploy/kvs-launch" -n 2 -s 1 --env "PS_HEARTBEAT_TIMEOUT=$HEARTBEAT" \
        -- "$BUILD/kvs-bench" rowsparse \
        --rows "$ROWS" --cols "$COLS" --touch "$TOUCH" "$@" > "$out/$name.log" 2>&1 &
    local job=$! peak=0 srv="" bin
    bin=$(readlink -f "$BUILD/kvs-server")
    while kill -0 "$job" 2>/dev/null; do
        if [ -z "$srv" ]; then
            for p in $(pgrep -x kvs-server); do
                [ "$(readlink -f /proc/$p/exe 2>/dev/null)" = "$bin" ] &&
                    grep -q "DMLC_PS_ROOT_PORT" /proc/$p/environ 2>/dev/null && srv=$p
            done
        fi
        if [ -n "$srv" ] && grep -q "init " "$out/$name.log"; then
            r=$(awk '/^VmRSS:/ {print $2}' /proc/$srv/status 2>/dev/null)
            [ -n "$r" ] && [ "$r" -gt "$peak" ] && peak=$r
        fi
        sleep 0.1
    done
    wait "$job" || { echo "row-sparse: job $name failed:"; tail -20 "$out/$name.log"; exit 1; }
    grep -E '^\[worker 0\]' "$out/$name.log" | grep -v " INFO \| WARN " | sed "s/^/$name: /"
    [ "$peak" -gt 0 ] && echo "$name: server VmRSS after init, most seen: $((peak / 1024)) MiB"
    return 0
}

p50() { sed -n "s/.*$2.*p50 \([0-9.]*\) ms.*/\1/p" "$out/$1.log" | head -1; }

run sparse --steps "$STEPS" --dense 0
run lazy-sgd --steps "$STEPS" --dense 0 --optimizer "sgd learning_rate=0.1 momentum=0.9"
run dense --steps 0 --dense "$DENSE"
s=$(p50 sparse "worker 0: row-sparse") d=$(p50 dense "worker 0: dense")
awk -v s="$s" -v d="$d" 'BEGIN { printf "row-sparse: dense round p50 %.1f ms / row-sparse step p50 %.2f ms = %.0fx\n", d, s, d / s }'
