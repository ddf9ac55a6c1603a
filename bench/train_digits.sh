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
# (dash ends the script on a `shift` past the end: count first)
if [ $# -gt 2 ]; then shift 2; else set --; fi
WORKERS=${*:-2 4}
SERVERS=${SERVERS:-1}
BATCH=${BATCH:-32}
for n in "$REPS" "$EPOCHS" $WORKERS; do
    case $n in
    ''|*[!0-9]*|0) echo "train_digits: '$n': expected a positive integer (usage: sh bench/train_digits.sh [REPS [EPOCHS [WORKERS...]]])" >&2; exit 2 ;;
    esac
done
if ! "$PY" -c 'import numpy, torch, sklearn' 2>/dev/null; then
    echo "train_digits: $PY cannot import numpy, torch and sklearn (python3-numpy, python3-torch, python3-sklearn: make deps)" >&2
    exit 1
fi
for f in "$BUILD/libkvs.so" "$BUILD/kvs-scheduler" "$BUILD/kvs-server"; do
    [ -e "$f" ] || { echo "train_digits: $f is missing (make all)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one run's output in $tmp/run: its median epoch time, or the run's last lines
# and exit 1 (a run that fails must not pass unseen)
median() {
    if ! grep -q 'RESULT ' "$tmp/run"; then
        echo "train_digits: a run ($1) printed no RESULT line; its last lines:" >&2
        tail -n 20 "$tmp/run" >&2
        exit 1
    fi
    grep 'RESULT ' "$tmp/run" | head -n 1 | "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read().split("RESULT ",1)[1]); print("%.4f" % r["median_epoch_s"])'
}
echo "train_digits: $REPS runs x $EPOCHS epochs, batch $BATCH per worker, kvsd with $SERVERS server(s); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for w in $WORKERS; do
    : > "$tmp/kvsd-$w"; : > "$tmp/kvsd-bucket-$w"; : > "$tmp/ddp-$w"
    for r in $(seq "$REPS"); do
        bash deploy/kvs-launch -n "$w" -s "$SERVERS" -- "$PY" examples/train_digits.py \
            --epochs "$EPOCHS" --batch "$BATCH" --json > "$tmp/run" 2>&1 || true
        grep -v '^\[worker [1-9]' "$tmp/run" > "$tmp/run0" || true
        mv "$tmp/run0" "$tmp/run"
        median "kvsd, W=$w" >> "$tmp/kvsd-$w"
        bash deploy/kvs-launch -n "$w" -s "$SERVERS" -- "$PY" examples/train_digits.py \
            --epochs "$EPOCHS" --batch "$BATCH" --bucket 1000000 --json > "$tmp/run" 2>&1 || true
        grep -v '^\[worker [1-9]' "$tmp/run" > "$tmp/run0" || true
        mv "$tmp/run0" "$tmp/run"
        median "kvsd-bucket, W=$w" >> "$tmp/kvsd-bucket-$w"
        "$PY" examples/train_digits.py --backend ddp --workers "$w" --epochs "$EPOCHS" \
            --batch "$BATCH" --json > "$tmp/run" 2>&1 || true
        median "ddp, W=$w" >> "$tmp/ddp-$w"
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
