#!/bin/sh
# Run every test program and print one summary line:
#   "total: N passed, N failed, N skipped[, N flaky]"
# Each program ends with its own "<name>: N passed, N failed[, N skipped[, N flaky]]";
# a program that exits non-zero fails even when its summary says 0 failed.
# Flaky: tests of a known-flaky list that failed, then passed on a rerun
# (tests/integ/tests.h); they are named on a line of their own at the end.
# The failures are named again just before the summary (at most 8 lines a
# program), so that the tail of a long log says what failed.
set -u
BUILD=${BUILD:-build}
pass=0 fail=0 skip=0 flaky=0 status=0 flaky_lines="" fail_lines=""
note_fail() {
    fail_lines="$fail_lines
  $1"
}
# failed NAME OUT: keep the lines of OUT that name a failure
failed() {
    fail_lines="$fail_lines
$(grep -E '^(not ok|FAIL)|:[FE]:' "$2" | head -n 8 | cut -c1-200 | sed "s/^/  $1: /")"
}
run() {
    name=$1; shift
    out="$BUILD/test-$name.out"
    # the program's exit status, not tee's
    { "$@" 2>&1; echo $? > "$out.rc"; } | tee "$out"
    rc=$(cat "$out.rc" 2>/dev/null || echo 1)
    rm -f "$out.rc"
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$name: runner ended without a summary line (exit $rc)"
        note_fail "$name: ended without a summary line (exit $rc)"
        fail=$((fail+1)); status=1; return
    fi
    p=$(echo "$line" | sed -E 's/^[a-z-]+: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^[^,]*, ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/^.* ([0-9]+) skipped.*/\1/p')
    k=$(echo "$line" | sed -nE 's/^.* ([0-9]+) flaky.*/\1/p')
    pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+${s:-0})); flaky=$((flaky+${k:-0}))
    if [ "${k:-0}" -ne 0 ]; then
        flaky_lines="$flaky_lines
$name:$(grep -E '^# flaky' "$out" | sed 's/^# flaky[^:]*://' | tr '\n' ' ')"
    fi
    [ "$f" -ne 0 ] && { status=1; failed "$name" "$out"; }
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$name: exited $rc although its summary says 0 failed"
        note_fail "$name: exited $rc although its summary says 0 failed"
        fail=$((fail+1)); status=1
    fi
}
# fuzz NAME CMD...: a corpus replay plus random inputs, one check (exit 0)
fuzz() {
    fname=$1; shift
    if "$@"; then
        echo "$fname: 1 passed, 0 failed"; pass=$((pass+1))
    else
        echo "$fname: 0 passed, 1 failed"; fail=$((fail+1)); status=1
        note_fail "$fname: its corpus or random inputs failed"
    fi
}
summary_failed() {
    [ -n "$fail_lines" ] && echo "failed:$fail_lines"
    return 0
}
# --long (make test-long): only the long tests, at the sizes the issues'
# targets name: the integration tests that skip without KVS_INTEG_LONG=1
# (replicated servers at 64 MiB x 500 rounds, an elastic join 10 s after a
# death) and the namespace hosts' --long cases.
if [ "${1:-}" = "--long" ]; then
    export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
    KVS_INTEG_LONG=1 run integ "$BUILD/test-integ" '*_long_*'
    run netns bash tests/netns/test-netns.sh --long
    summary_failed
    echo "total: $pass passed, $fail failed, $skip skipped (long)"
    exit $status
fi
# check kills a test after CK_DEFAULT_TIMEOUT s (4 by default): too tight for a
# loaded 2-core machine or a sanitizer build; a hang still fails.
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
# KVS_TEST_SANITIZED=1 (make asan): the programs that run kvsd's C code
# (unit, integration, namespaces, devices, fuzz corpora) on a sanitizer
# build; the checks of scripts, docs, symbols and the Python package
# (whose interpreter cannot load a sanitized libkvs) ran in make test.
if [ "${KVS_TEST_SANITIZED:-0}" = 1 ]; then
    # an allocation over a test's RLIMIT_AS returns NULL, as malloc does (the
    # out-of-memory tests check the answer to it); a small quarantine, so
    # that freed memory counts as freed (the memory-bound tests)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:quarantine_size_mb=16}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # a sanitizer build runs the big sums and codecs several times slower
    export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
    run unit "$BUILD/test-unit"
    run integ "$BUILD/test-integ"
    run netns bash tests/netns/test-netns.sh
    [ -x "$BUILD/tests/kvs-devworker" ] && run devices bash tests/device/test-dist-device.sh
    for f in "run-corpus tests/fuzz/corpus" "run-http tests/fuzz/http-corpus" \
             "replay-worker tests/fuzz/worker-corpus"; do
        set -- $f
        [ -x "$BUILD/fuzz/$1" ] || continue
        fuzz "fuzz-$1" "$BUILD/fuzz/$1" -n 20000 "$2"
    done
    summary_failed
    echo "total: $pass passed, $fail failed, $skip skipped (sanitized)"
    exit $status
fi
run unit "$BUILD/test-unit"
run config sh tests/config/check-config.sh
run cli sh tests/tools/test-cli.sh
[ -x "$BUILD/test-integ" ] && run integ "$BUILD/test-integ"
run launch bash tests/launch/test-launch.sh
# multi-host cases in network namespaces (root; one SKIP line otherwise)
run netns bash tests/netns/test-netns.sh
[ -x "$BUILD/tests/kvs-devworker" ] && run devices bash tests/device/test-dist-device.sh
run python sh tests/python/run.sh
run symbols sh tests/symbols/check-exports.sh
# no file includes or calls a file that includes or calls it back
run circles sh tests/symbols/check-circles.sh
# each binary carries only the code it calls
run linkmap python3 tests/symbols/check-linkmap.py "$BUILD"
# every relative link in the Markdown files resolves (files and #headings)
run docs sh tests/docs/check-links.sh
# the proto fuzz corpus plus 200k random inputs: one check
[ -x "$BUILD/fuzz/run-corpus" ] && fuzz fuzz "$BUILD/fuzz/run-corpus" -n 200000 tests/fuzz/corpus
# the metrics responder's HTTP parser: corpus plus 200k random inputs
[ -x "$BUILD/fuzz/run-http" ] && fuzz fuzz-http "$BUILD/fuzz/run-http" -n 200000 tests/fuzz/http-corpus
# the scheduler's and the server's dispatch, and a worker's handling of the
# servers' answers, in-process: corpus plus 5000 random inputs each (a real
# scheduler or server, or a store put together by hand, per input)
for t in sched server worker; do
    [ -x "$BUILD/fuzz/replay-$t" ] || continue
    fuzz "fuzz-$t" "$BUILD/fuzz/replay-$t" -n 5000 "tests/fuzz/$t-corpus"
done
[ -x "$BUILD/tests/kvs-opsworker" ] && run ops bash tests/ops/test-ops.sh
run install bash tests/ops/test-install.sh
run deploy bash tests/ops/test-deploy.sh
# the GPU check's own logic on simulated devices (a GPU machine runs
# tests/gpu/run.sh itself)
[ -x "$BUILD/tests/kvs-gpucheck" ] && run gpu sh tests/gpu/run.sh --sim 2 --quick
summary_failed
if [ "$flaky" -ne 0 ]; then
    echo "flaky: $flaky known-flaky test(s) failed once and passed on rerun:$flaky_lines"
    echo "total: $pass passed, $fail failed, $skip skipped, $flaky flaky"
else
    echo "total: $pass passed, $fail failed, $skip skipped"
fi
exit $status
