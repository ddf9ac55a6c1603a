#!/bin/sh
# check-exports.sh - libkvs.so exports the public API and nothing else: its
# defined dynamic symbols are exactly the functions declared in
# include/kvs.h (the version script worker/libkvs.ver exports kvs_*, so an
# internal name must not start with kvs_).
# Prints "symbols: N passed, N failed".
set -u
BUILD=${BUILD:-build}
LIB="$BUILD/libkvs.so"
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok: $*"; }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
if [ ! -f "$LIB" ]; then
    bad "$LIB does not exist"
    echo "symbols: $pass passed, $fail failed"; exit 1
fi
# defined symbols only (U = imported from libzmq, libc, ...); strip @VERSION
defined=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sed 's/@.*//' | sort -u)
others=$(printf '%s\n' "$defined" | grep -v '^kvs_' | grep -v '^KVS_0$' | grep -v '^$')
if [ -z "$others" ]; then
    ok "every exported symbol is kvs_* ($(printf '%s\n' "$defined" | grep -c '^kvs_') of them)"
else
    bad "libkvs.so exports internal symbols: $(echo $others)"
fi
# the functions kvs.h declares: its prototypes, comments and macros gone
declared=$(${CC:-cc} -E -P -Iinclude include/kvs.h 2>/dev/null |
           grep -oE '\bkvs_[a-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:]]*($//' | sort -u)
exported=$(printf '%s\n' "$defined" | grep '^kvs_' | sort -u)
if [ -z "$declared" ]; then
    bad "found no function declared in include/kvs.h"
else
    extra=$(printf '%s\n' "$exported" | grep -vxF "$declared")
    missing=$(printf '%s\n' "$declared" | grep -vxF "$exported")
    if [ -z "$extra" ]; then
        ok "every exported symbol is declared in kvs.h ($(printf '%s\n' "$exported" | wc -l) of them)"
    else
        bad "libkvs.so exports functions kvs.h does not declare: $(echo $extra)"
    fi
    if [ -z "$missing" ]; then
        ok "every function kvs.h declares is exported ($(printf '%s\n' "$declared" | wc -l) of them)"
    else
        bad "kvs.h declares functions libkvs.so does not export: $(echo $missing)"
    fi
fi
for f in kvs_create kvs_close kvs_init kvs_push kvs_pull kvs_pushpull kvs_wait kvs_strerror \
         kvs_last_error; do
    if printf '%s\n' "$defined" | grep -qx "$f"; then ok "exports $f"; else bad "missing $f"; fi
done
# a program linked against the shared library still resolves everything
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'C'
#include <stdio.h>
#include "kvs.h"
int main(void) { puts(kvs_strerror(KVS_ENOMEM)); return 0; }
C
cp "$LIB" "$tmp/libkvs.so.0" && ln -s libkvs.so.0 "$tmp/libkvs.so"
if ${CC:-cc} -Iinclude -o "$tmp/t" "$tmp/t.c" -L"$tmp" -lkvs -Wl,-rpath,"$tmp" \
        2>"$tmp/err" && "$tmp/t" >/dev/null 2>>"$tmp/err"; then
    ok "a program links against libkvs.so and runs"
else
    bad "linking a program against libkvs.so: $(cat "$tmp/err")"
fi
echo "symbols: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
