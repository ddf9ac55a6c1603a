#!/bin/sh
# Run the Python tests (tests/python, Debian's pytest) and print one line:
#   "python: N passed, N failed, N skipped"
# from pytest's JUnit report.  pytest collecting nothing (exit 5), or ending
# badly without a failed test in its report, counts as a failure.
# Usage: sh tests/python/run.sh [pytest args...]    (BUILD=dir picks the build)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PY=${KVS_PYTHON:-/usr/bin/python3}
report=$BUILD/test-python.xml
rm -f "$report"
if ! "$PY" -c 'import pytest, numpy' 2>/dev/null; then
    echo "python: $PY cannot import pytest and numpy (run deploy/install-deps.sh)"
    echo "python: 0 passed, 1 failed"
    exit 1
fi
# A sanitizer build of libkvs needs its runtime loaded first.
preload=
if ldd "$BUILD/libkvs.so" 2>/dev/null | grep -q libasan; then
    for l in libasan.so libubsan.so; do
        f=$(${CC:-cc} -print-file-name=$l)
        [ -f "$f" ] && preload="$preload $f"
    done
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
export KVS_LIBRARY="$BUILD/libkvs.so" KVS_BIN_DIR="$BUILD" BUILD PYTHONDONTWRITEBYTECODE=1
LD_PRELOAD="${preload# }${LD_PRELOAD:+ $LD_PRELOAD}" \
    "$PY" -m pytest -p no:cacheprovider -q -rfEs --junitxml="$report" "$ROOT/tests/python" "$@"
rc=$?
counts=$("$PY" - "$report" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    sys.exit(1)
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = f = s = 0
for su in suites:
    t += int(su.get("tests", 0))
    f += int(su.get("failures", 0)) + int(su.get("errors", 0))
    s += int(su.get("skipped", 0))
print(t - f - s, f, s)
PYEOF
) || counts=
if [ -z "$counts" ]; then
    echo "python: pytest wrote no report (exit $rc)"
    echo "python: 0 passed, 1 failed"
    exit 1
fi
set -- $counts
passed=$1 failed=$2 skipped=$3
if [ "$rc" -eq 5 ]; then
    echo "python: pytest collected no tests (exit 5)"
    failed=$((failed + 1))
elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "python: pytest exit $rc without a failed test in its report"
    failed=1
fi
echo "python: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
