#!/bin/sh
# run-fuzz.sh BIN CORPUS SECONDS WORK [libFuzzer options...]
#
# Fuzz BIN (a libFuzzer binary) for SECONDS, starting from CORPUS, then add
# to CORPUS the new inputs that reach new edges (-merge=1 -use_counters=0: a
# few hundred files, not every hit count; existing files,
# named regression inputs included, are kept as they are).  Crashing inputs
# are left in WORK (crash-*, leak-*, timeout-*, oom-*); the exit status is
# libFuzzer's (non-zero: a finding; fix it and add the input to CORPUS).
set -u
bin=$1 corpus=$2 secs=$3 work=$4
shift 4
new=$work/new-$(basename "$corpus")
rm -rf "$new"
mkdir -p "$new" "$corpus" "$work"
status=0
supp=$(cd "$(dirname "$0")" && pwd)/lsan.supp
export LSAN_OPTIONS="suppressions=$supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
"$bin" -max_total_time="$secs" -artifact_prefix="$work/" "$@" "$new" "$corpus" || status=$?
before=$(ls "$corpus" | wc -l)
"$bin" -merge=1 -use_counters=0 "$@" "$corpus" "$new" >"$work/merge-$(basename "$corpus").log" 2>&1 ||
    echo "run-fuzz: merging into $corpus failed (see $work/merge-$(basename "$corpus").log)"
echo "run-fuzz: $(basename "$bin"): $(($(ls "$corpus" | wc -l) - before)) new inputs in $corpus;" \
     "status $status"
rm -rf "$new"
exit $status
