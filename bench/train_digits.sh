#!/bin/sh
# Time per epoch of examples/train_digits.py: kvsd (under kvs-launch) against
# PyTorch DDP (gloo), same shards, same per-worker batch, for W = 2 and 4.
# Runs alternate (kvsd, kvsd-bucket, ddp, kvsd, ...) so that a busy machine
# slows them alike; kvsd-bucket is kvsd with --bucket 1000000 (all gradients
# of a step in one call, one message per server: DDP's bucketing).  Each run
# reports the median epoch time of epochs 2..E; the table gives every run's
# median and their median.
# Usage: sh bench/train_digits.sh [REPS [EPOCHS [WORKERS...]]]   (3 12 2 4)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON3:-/usr/bin/python3}
export KVS_BIN_DIR="$BUILD" KVS_LIBRARY="$PWD/$BUILD/libkvs.so" PYTHONPATH="$PWD/python"
REPS=${1:-3}
EPOCHS=${2:-12}
shift 2 2>/dev/null || set --
WORKERS=${*:-2 4}
SERVERS=${SERVERS:-1}
BATCH=${BATCH:-32}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read().split("RESULT ",1)[1]); print("%.4f" % r["median_epoch_s"])'; }
echo "train_digits: $REPS runs x $EPOCHS epochs, batch $BATCH per worker, kvsd with $SERVERS server(s); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for w in $WORKERS; do
    : > "$tmp/kvsd-$w"; : > "$tmp/kvsd-bucket-$w"; : > "$tmp/ddp-$w"
    for r in $(seq "$REPS"); do
        bash deploy/kvs-launch -n "$w" -s "$SERVERS" -- "$PY" examples/train_digits.py \
            --epochs "$EPOCHS" --batch "$BATCH" --json 2>/dev/null |
            grep '^\[worker 0\] RESULT' | median >> "$tmp/kvsd-$w"
        bash deploy/kvs-launch -n "$w" -s "$SERVERS" -- "$PY" examples/train_digits.py \
            --epochs "$EPOCHS" --batch "$BATCH" --bucket 1000000 --json 2>/dev/null |
            grep '^\[worker 0\] RESULT' | median >> "$tmp/kvsd-bucket-$w"
        "$PY" examples/train_digits.py --backend ddp --workers "$w" --epochs "$EPOCHS" \
            --batch "$BATCH" --json 2>/dev/null | grep '^RESULT' | median >> "$tmp/ddp-$w"
    done
done
printf '%-8s %-12s %-30s %s\n' workers backend "median s/epoch of each run" "median"
for w in $WORKERS; do
    for b in kvsd kvsd-bucket ddp; do
        runs=$(tr '\n' ' ' < "$tmp/$b-$w")
        med=$(sort -n "$tmp/$b-$w" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
        printf '%-8s %-12s %-30s %s\n' "$w" "$b" "$runs" "$med"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
