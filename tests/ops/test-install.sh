#!/usr/bin/env bash
# make install / uninstall round trip into a temporary prefix (with LIBDIR
# elsewhere), --version on every installed binary, man pages, pkg-config
# (shared and --static) building and running a worker against the install.
# Usage: BUILD=build bash tests/ops/test-install.sh    Ends "install: N passed, N failed".
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-install-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

P=$WORK/prefix L=$WORK/prefix/lib64x
want=$(awk '/^#define KVS_VERSION_(MAJOR|MINOR|PATCH) / { v[$2] = $3 }
            END { print v["KVS_VERSION_MAJOR"] "." v["KVS_VERSION_MINOR"] "." v["KVS_VERSION_PATCH"] }' "$ROOT/include/kvs.h")
make -C "$ROOT" -s BUILD="$BUILD" PREFIX="$P" LIBDIR="$L" install >"$WORK/install.log" 2>&1
check "make install PREFIX=... LIBDIR=... succeeds" test $? = 0

for b in kvs-scheduler kvs-server kvs-launch kvs-bench kvs-topo kvs-trace kvs-guard; do
    v=$("$P/bin/$b" --version 2>&1)
    check "$b --version says $want" test "$v" = "$b (kvsd) $want"
done
check "kvs-guard PID -- CMD --version runs CMD (options only as the first argument)" \
    test "$("$P/bin/kvs-guard" $$ -- printf '%s;' --version --help)" = "--version;--help;"
check "libkvs in LIBDIR: .a, .so.VERSION, .so.0, .so links" eval \
    '[[ -f $L/libkvs.a && -f $L/libkvs.so.$want && $(readlink "$L/libkvs.so.0") == libkvs.so.$want && $(readlink "$L/libkvs.so") == libkvs.so.0 ]]'
check "kvs.h and kvs.pc installed" eval '[[ -f $P/include/kvs.h && -f $L/pkgconfig/kvs.pc ]]'
for m in kvs-scheduler.1 kvs-server.1 kvs-launch.1 kvs-bench.1 kvs-topo.1 kvs-trace.1 kvs-guard.1; do
    check "man page $m renders, with the version" eval \
        'MANWIDTH=80 man -l "$P/share/man/man1/$m" 2>/dev/null | grep -q "kvsd $want" && [[ -z $(groff -man -Tutf8 -ww -z "$P/share/man/man1/$m" 2>&1) ]]'
done
check "man page kvs(3) renders" eval 'MANWIDTH=80 man -l "$P/share/man/man3/kvs.3" 2>/dev/null | grep -q "kvs_create"'

export PKG_CONFIG_PATH=$L/pkgconfig
check "pkg-config --modversion kvs" test "$(pkg-config --modversion kvs)" = "$want"
cat >"$WORK/prog.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <kvs.h>
int main(void)
{
    kvs_store *kv;
    float v[3] = {1, 2, 3}, out[3];
    uint64_t key = 5;
    kvs_array a = {v, 3, KVS_FLOAT32, KVS_CPU}, o = {out, 3, KVS_FLOAT32, KVS_CPU};
    if (kvs_create("local", &kv) || kvs_init(kv, 1, &key, &a) || kvs_push(kv, 1, &key, &a, 0) ||
        kvs_pull(kv, 1, &key, &o, 0) || kvs_wait_all(kv))
        return 1;
    printf("%s %g %g %g\n", kvs_version(), out[0], out[1], out[2]);
    return kvs_close(kv) || strcmp(kvs_version(), KVS_VERSION_STRING) != 0;
}
EOF
cc -o "$WORK/prog" "$WORK/prog.c" $(pkg-config --cflags --libs kvs) 2>"$WORK/cc1.log"
check "a worker builds with pkg-config --cflags --libs kvs and runs" eval \
    '[[ $("$WORK/prog") == "$want 1 2 3" ]] && ldd "$WORK/prog" | grep -q "libkvs.so.0 => $L/libkvs.so.0"'
libs=$(pkg-config --static --libs kvs) 2>"$WORK/pc.log"
check "pkg-config --static --libs kvs works" eval '[[ -n $libs ]] && ! [[ -s $WORK/pc.log ]]'
cc -o "$WORK/prog-static" "$WORK/prog.c" $(pkg-config --cflags kvs) -Wl,-Bstatic -lkvs -Wl,-Bdynamic \
    $(pkg-config --static --libs kvs) 2>"$WORK/cc2.log"
check "libkvs.a links with pkg-config --static's libraries; no libkvs.so needed" eval \
    '[[ $("$WORK/prog-static") == "$want 1 2 3" ]] && ! ldd "$WORK/prog-static" | grep -q libkvs || { cat "$WORK/cc2.log"; false; }'

pyout=$(cd / && env -u KVS_LIBRARY PYTHONPATH="$P/lib/python3/site-packages" /usr/bin/python3 -c \
    'import kvsd, kvsd._lib as l; print(l.path, kvsd.errname(0))' 2>&1)
check "the installed Python package finds libkvs in LIBDIR by itself" \
    test "$pyout" = "$L/libkvs.so KVS_OK"

make -C "$ROOT" -s BUILD="$BUILD" PREFIX="$P" LIBDIR="$L" uninstall >"$WORK/uninstall.log" 2>&1
check "make uninstall succeeds" test $? = 0
left=$(cd "$P" 2>/dev/null && find . -type f -o -type l)
check "uninstall removed every installed file" eval '[[ -z $left ]] || { echo "$left"; false; }'

echo "install: $pass passed, $fail failed"
[[ $fail == 0 ]]
