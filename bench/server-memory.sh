#!/bin/bash
# bench/server-memory.sh CMD...: run CMD (a kvs-launch job) and print the
# peak resident memory (VmHWM) of each kvs-server it started, sampled from
# /proc every 20 ms until the server exits.  Servers are the kvs-server
# processes whose executable is $KVS_BIN_DIR/kvs-server (default build/).
#   bench/server-memory.sh bash deploy/kvs-launch -n 2 -s 2 --env KVS_CMA=0 -- \
#       build/kvs-bench --sizes 64M --ops pushpull --iters 10
set -u
bin=$(readlink -f "${KVS_BIN_DIR:-build}/kvs-server")
out=$(mktemp -d)
"$@" > "$out/cmd.log" 2>&1 &
cmd=$!
declare -A peak
while kill -0 "$cmd" 2>/dev/null; do
    for p in $(pgrep -x kvs-server); do
        [ "$(readlink -f /proc/$p/exe 2>/dev/null)" = "$bin" ] || continue
        h=$(awk '/^VmHWM:/ {print $2}' /proc/$p/status 2>/dev/null)
        [ -n "$h" ] && { [ -z "${peak[$p]:-}" ] || [ "$h" -gt "${peak[$p]}" ]; } && peak[$p]=$h
    done
    sleep 0.02
done
wait "$cmd"; rc=$?
grep -E '^\[worker 0\]' "$out/cmd.log" | grep -v " INFO \| WARN " | tail -n 4
for p in "${!peak[@]}"; do
    echo "server pid $p: VmHWM $((peak[$p] / 1024)) MiB"
done
rm -rf "$out"
exit $rc
