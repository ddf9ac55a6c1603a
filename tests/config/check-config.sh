#!/bin/sh
# The configuration table (common/cfgvars.h) against the rest of the tree:
#   1. docs/ref/env.md has one row ("| `NAME` |") for every variable and no other
#   2. every variable a man page's ENVIRONMENT section names is in the table
#   3. only common/config.c reads the environment (getenv) in the C sources,
#      but for the fault-injection hook of the test build (server/ctl.c)
# Prints "config: N passed, N failed" like the other test programs.
set -u
cd "$(dirname "$0")/../.."
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; fail=$((fail+1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sed -n 's/^ *X(\([A-Z][A-Z0-9_]*\),.*/\1/p' common/cfgvars.h | sort > "$tmp/table"
dups=$(uniq -d "$tmp/table")
[ -z "$dups" ] && ok "table: $(wc -l < "$tmp/table") variables, each once" \
    || bad "table: listed twice: $dups"

if [ -f docs/ref/env.md ]; then
    sed -n 's/^| `\([A-Z][A-Z0-9_]*\)` |.*/\1/p' docs/ref/env.md | sort > "$tmp/doc"
    missing=$(comm -23 "$tmp/table" "$tmp/doc" | tr '\n' ' ')
    extra=$(comm -13 "$tmp/table" "$tmp/doc" | tr '\n' ' ')
    dupdoc=$(uniq -d "$tmp/doc" | tr '\n' ' ')
    if [ -z "$missing$extra$dupdoc" ]; then
        ok "docs/ref/env.md: the same $(wc -l < "$tmp/doc") variables"
    else
        bad "docs/ref/env.md: not documented: ${missing:-none}; not in common/cfgvars.h: ${extra:-none}; twice: ${dupdoc:-none}"
    fi
else
    bad "docs/ref/env.md: missing"
fi

# man pages: the names in ENVIRONMENT (a trailing _ is a prefix: "KVS_*")
for m in man/*.[0-9]; do
    awk '/^\.SH /{p = ($2 == "ENVIRONMENT")} p' "$m" |
        grep -oE '\b(DMLC|PS|MXNET|KVS)_[A-Z0-9_]*[A-Z0-9]\b' | sort -u > "$tmp/man"
    unknown=$(comm -23 "$tmp/man" "$tmp/table" | tr '\n' ' ')
    [ -z "$unknown" ] && ok "$m: ENVIRONMENT names only table variables" \
        || bad "$m: ENVIRONMENT names variables kvsd does not read: $unknown"
done

# Every variable is read through common/config.c (the table's readers and
# cfg_get_str); a new getenv elsewhere fails here.
readers=$(grep -rln --include='*.c' --include='*.h' --include='*.cu' 'getenv *(' \
    common device net optim proto reduce scheduler server tools tree worker include |
    grep -v '^common/config\.c$' | sort | tr '\n' ' ')
[ "$readers" = "server/ctl.c " ] && ok "getenv: only common/config.c (and the test build's fault hook)" \
    || bad "getenv outside common/config.c: $readers(read it through cfg: common/cfgvars.h)"
grep -n 'getenv *(' server/ctl.c | grep -qv KVS_TEST_CKPT_CRASH \
    && bad "server/ctl.c: getenv of something but KVS_TEST_CKPT_CRASH" \
    || ok "server/ctl.c: getenv only KVS_TEST_CKPT_CRASH"

echo "config: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
