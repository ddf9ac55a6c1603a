#!/bin/sh
# Run every test program and print one summary line:
#   "total: N passed, N failed"
# Each program ends with its own "<name>: N passed, N failed[, N skipped]".
set -u
BUILD=${BUILD:-build}
pass=0 fail=0 skip=0 status=0
run() {
    name=$1; shift
    out="$BUILD/test-$name.out"
    "$@" 2>&1 | tee "$out"
    rc=$?
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$name: runner ended without a summary line (exit $rc)"
        fail=$((fail+1)); status=1; return
    fi
    p=$(echo "$line" | sed -E 's/^[a-z]+: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^.* ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/^.* ([0-9]+) skipped.*/\1/p')
    pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+${s:-0}))
    [ "$f" -ne 0 ] && status=1
}
# check kills a test after CK_DEFAULT_TIMEOUT s (4 by default): too tight for a
# loaded 2-core machine or a sanitizer build; a hang still fails.
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
run unit "$BUILD/test-unit"
[ -x "$BUILD/test-integ" ] && run integ "$BUILD/test-integ"
run launch bash tests/launch/test-launch.sh
# multi-host cases in network namespaces (root; one SKIP line otherwise)
run netns bash tests/netns/test-netns.sh
[ -x "$BUILD/tests/kvs-devworker" ] && run devices bash tests/device/test-dist-device.sh
run python sh tests/python/run.sh
run symbols sh tests/symbols/check-exports.sh
# the proto fuzz corpus plus 200k random inputs: one check
if [ -x "$BUILD/fuzz/run-corpus" ]; then
    if "$BUILD/fuzz/run-corpus" -n 200000 tests/fuzz/corpus; then
        echo "fuzz: 1 passed, 0 failed"; pass=$((pass+1))
    else
        echo "fuzz: 0 passed, 1 failed"; fail=$((fail+1)); status=1
    fi
fi
# the metrics responder's HTTP parser: corpus plus 200k random inputs
if [ -x "$BUILD/fuzz/run-http" ]; then
    if "$BUILD/fuzz/run-http" -n 200000 tests/fuzz/http-corpus; then
        echo "fuzz-http: 1 passed, 0 failed"; pass=$((pass+1))
    else
        echo "fuzz-http: 0 passed, 1 failed"; fail=$((fail+1)); status=1
    fi
fi
# the scheduler's and the server's dispatch, in-process: corpus plus 5000
# random inputs each (one real scheduler / server per input)
for t in sched server; do
    [ -x "$BUILD/fuzz/replay-$t" ] || continue
    if "$BUILD/fuzz/replay-$t" -n 5000 "tests/fuzz/$t-corpus"; then
        echo "fuzz-$t: 1 passed, 0 failed"; pass=$((pass+1))
    else
        echo "fuzz-$t: 0 passed, 1 failed"; fail=$((fail+1)); status=1
    fi
done
[ -x "$BUILD/tests/kvs-opsworker" ] && run ops bash tests/ops/test-ops.sh
run install bash tests/ops/test-install.sh
run deploy bash tests/ops/test-deploy.sh
if [ -d "$BUILD/gpu" ] && ls "$BUILD"/gpu/* >/dev/null 2>&1; then
    run gpu sh tests/gpu/run.sh
fi
echo "total: $pass passed, $fail failed, $skip skipped"
exit $status
