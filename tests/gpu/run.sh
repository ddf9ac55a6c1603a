#!/bin/sh
# Build and run every GPU test (tests/gpu/*.cu) and print a table.
# Exit 0 if none failed (skips are fine: no GPU, or no nvcc).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
make -s BUILD="$BUILD" all gpu-test || { echo "gpu: build failed"; exit 1; }
pass=0 fail=0 skip=0
printf '%-36s %-6s %s\n' TEST RESULT SECONDS
for t in "$BUILD"/gpu/*; do
    [ -x "$t" ] || continue
    start=$(date +%s.%N)
    "$t" > "$BUILD/gpu/$(basename "$t").log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    case $rc in
        0) r=PASS; pass=$((pass+1)) ;;
        77) r=SKIP; skip=$((skip+1)) ;;
        *) r=FAIL; fail=$((fail+1)) ;;
    esac
    printf '%-36s %-6s %.2f\n' "$(basename "$t")" "$r" "$(awk "BEGIN{print $end - $start}")"
    [ "$r" = FAIL ] && sed 's/^/    /' "$BUILD/gpu/$(basename "$t").log" | tail -20
done
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
