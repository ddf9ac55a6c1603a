#!/bin/sh
# make demo-python: a small PyTorch CNN trained data-parallel by 2 workers
# through kvsd (1 server), a few epochs, then the same through PyTorch DDP.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON3:-/usr/bin/python3}
export KVS_BIN_DIR="$BUILD" KVS_LIBRARY="$PWD/$BUILD/libkvs.so" PYTHONPATH="$PWD/python"
EPOCHS=${EPOCHS:-4}
echo "demo-python: scikit-learn's digits (8x8 images), a 4-layer CNN, 2 workers x 32 samples per step"
echo "demo-python: through kvsd: every gradient pushed as the backward pass makes it, the sum pulled"
echo "demo-python: command: deploy/kvs-launch -n 2 -s 1 -- $PY examples/train_digits.py --epochs $EPOCHS"
echo
start=$(date +%s.%N)
bash deploy/kvs-launch -n 2 -s 1 -- "$PY" examples/train_digits.py --epochs "$EPOCHS" 2>&1 |
    grep '^\[worker 0\]' | sed 's/^\[worker 0\] //'
mid=$(date +%s.%N)
echo
echo "demo-python: the same shards through PyTorch DDP (gloo):"
echo "demo-python: command: $PY examples/train_digits.py --backend ddp --workers 2 --epochs $EPOCHS"
echo
"$PY" examples/train_digits.py --backend ddp --workers 2 --epochs "$EPOCHS"
end=$(date +%s.%N)
echo
echo "demo-python: kvsd job $(awk "BEGIN{printf \"%.1f\", $mid - $start}") s, DDP $(awk "BEGIN{printf \"%.1f\", $end - $mid}") s (both include starting Python and PyTorch)."
echo "demo-python: same seed, same shards: the losses and accuracies agree; times per epoch: bench/RESULTS.md."
