#!/bin/sh
# check-circles.sh - no file includes or calls a file that includes or calls
# it back (check-circles.py; the rules: docs/design/layout.md).  First the
# checker must find the circles of a small tree made to have them; then the
# real tree (its objects under $BUILD/obj) must have none.
# Prints "circles: N passed, N failed".
set -u
BUILD=${BUILD:-build}
CC=${CC:-cc}
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok: $*"; }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a tree with three circles: worker/a.c and worker/b.c call each other;
# server/c.c includes server/d.h, and d.c calls c.c; common/e.c includes
# common/e_int.h (no .c of its own), which includes common/f.h, and f.c calls
# e.c.  server/g.c calls server/c.c one way only: no circle of its own.
mkdir -p "$tmp/t/worker" "$tmp/t/server" "$tmp/t/common"
cd "$tmp/t"
printf 'int b_f(void);\nint a_f(void) { return 1; }\nint a_g(void) { return b_f(); }\n' > worker/a.c
printf 'int a_f(void);\nint b_f(void) { return a_f(); }\n' > worker/b.c
printf '#include "server/d.h"\nint c_f(void) { return D_ONE; }\n' > server/c.c
printf '#define D_ONE 1\n' > server/d.h
printf 'int c_f(void);\nint d_f(void) { return c_f(); }\n' > server/d.c
printf 'int c_f(void);\nint g_f(void) { return c_f(); }\n' > server/g.c
printf '#include "common/f.h"\n' > common/e_int.h
printf '#include "common/e_int.h"\nint e_f(void) { return F_ONE; }\n' > common/e.c
printf '#define F_ONE 1\n' > common/f.h
printf 'int e_f(void);\nint f_f(void) { return e_f(); }\n' > common/f.c
built=true
for f in worker/a worker/b server/c server/d server/g common/e common/f; do
    mkdir -p "obj-build/obj/$(dirname $f)"
    $CC -I. -c "$f.c" -o "obj-build/obj/$f.o" 2>>"$tmp/cc.err" || built=false
done
if ! $built; then
    bad "compiling the test tree: $(cat "$tmp/cc.err")"
else
    python3 "$here/check-circles.py" obj-build > "$tmp/self.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then ok "the checker fails on a tree with circles"; else bad "the checker passed a tree with circles"; fi
    grep -q 'FAIL: worker/: circle among worker/a, worker/b' "$tmp/self.out" &&
        ok "it finds a call circle (worker/a.c <-> worker/b.c)" ||
        bad "no call circle found: $(cat "$tmp/self.out")"
    grep -q 'FAIL: server/: circle among server/c, server/d:' "$tmp/self.out" &&
        grep -q 'server/c.c includes server/d.h' "$tmp/self.out" &&
        ok "it finds an include-and-call circle (server/c.c, server/d.c)" ||
        bad "no include circle found: $(cat "$tmp/self.out")"
    grep -q 'common/e.c includes common/e_int.h, which includes common/f.h' "$tmp/self.out" &&
        ok "it looks through a header without a .c (common/e_int.h)" ||
        bad "no circle through common/e_int.h found: $(cat "$tmp/self.out")"
    grep -q 'server/g' "$tmp/self.out" &&
        bad "a one-way call (server/g.c -> server/c.c) was reported" ||
        ok "a one-way call is not a circle"
fi
cd - >/dev/null

# the real tree
python3 "$here/check-circles.py" "$BUILD" > "$tmp/real.out" 2>&1
grep -v '^circles: ' "$tmp/real.out"
line=$(grep -E '^circles: [0-9]+ passed, [0-9]+ failed' "$tmp/real.out" | tail -n 1)
if [ -z "$line" ]; then
    bad "check-circles.py ended without a summary"
else
    p=$(echo "$line" | sed -E 's/^circles: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^.* ([0-9]+) failed.*/\1/')
    pass=$((pass+p)); fail=$((fail+f))
fi
echo "circles: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
