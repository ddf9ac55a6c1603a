#!/bin/sh
# Command lines and start-up refusals: kvs-topo names every bad argument
# (exit 2) and reads the planner's variables through the configuration
# table; the daemons refuse IPv6 addresses and ps-lite transports kvsd does
# not have at start-up (exit 2, a line naming the variable).
# Prints "cli: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
TOPO=$B/kvs-topo
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# expect RC NEEDLE CMD...: exit status RC and NEEDLE in stderr (or stdout)
expect() {
    want=$1 needle=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" = "$want" ] && grep -qF -- "$needle" "$tmp/err" "$tmp/out"; then
        echo "ok   $* -> $rc, says: $needle"; pass=$((pass+1))
    else
        echo "FAIL $* -> $rc (expected $want and '$needle')"; sed 's/^/    | /' "$tmp/err" | head -5
        fail=$((fail+1))
    fi
}
if [ ! -x "$TOPO" ]; then
    echo "cli: 0 passed, 1 failed ($TOPO not built)"; exit 1
fi
expect 2 "unknown command 'frobnicate'" "$TOPO" frobnicate
expect 2 "'--bogus': unknown option" "$TOPO" plan --bogus
expect 2 "'--topologies': unknown option or missing value" "$TOPO" plan --topologies
expect 2 "unexpected argument 'extra'" env KVS_TOPOLOGY='0,1;1,0' "$TOPO" plan extra
expect 2 "--mode 'sideways'" "$TOPO" plan --mode sideways
expect 2 "'--wat': unknown option" "$TOPO" detect --wat
expect 2 "--trees TREES.json is required" "$TOPO" score --topologies x.json
expect 2 "--n N" "$TOPO" gen
expect 2 "KVS_TOPOLOGY is not set" env -u KVS_TOPOLOGY "$TOPO" plan
expect 2 "KVS_TREE_EFFORT='lots'" env KVS_TOPOLOGY='0,1;1,0' KVS_TREE_EFFORT=lots "$TOPO" plan
expect 2 "KVS_TOPOLOGY" env KVS_TOPOLOGY='0,2;2,zero' "$TOPO" plan
expect 0 "" env KVS_TOPOLOGY='0,2,2;2,0,3;2,3,0' "$TOPO" plan
# the daemons, before they bind anything
job="DMLC_PS_ROOT_PORT=9 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1"
expect 2 "DMLC_PS_ROOT_URI='::1': IPv6 addresses are not supported" \
    timeout 20 env $job DMLC_PS_ROOT_URI=::1 "$B/kvs-scheduler"
expect 2 "DMLC_PS_ROOT_URI='[fe80::1]': IPv6" timeout 20 env $job DMLC_PS_ROOT_URI='[fe80::1]' "$B/kvs-server"
expect 2 "DMLC_NODE_HOST='2001:db8::2': IPv6" \
    timeout 20 env $job DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NODE_HOST=2001:db8::2 "$B/kvs-server"
expect 2 "DMLC_PS_ROOT_URI='10.0.0.1:9000': expected an IPv4 address or a host name, without a port" \
    timeout 20 env $job DMLC_PS_ROOT_URI=10.0.0.1:9000 "$B/kvs-server"
expect 2 "DMLC_ENABLE_RDMA='1': kvsd has no such transport" \
    timeout 20 env $job DMLC_PS_ROOT_URI=127.0.0.1 DMLC_ENABLE_RDMA=1 "$B/kvs-scheduler"
expect 2 "DMLC_ENABLE_UCX='yes': kvsd has no such transport" \
    timeout 20 env $job DMLC_PS_ROOT_URI=127.0.0.1 DMLC_ENABLE_UCX=yes "$B/kvs-server"
echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
