#!/usr/bin/env bash
# Operations tests: /metrics of the scheduler and servers scraped during a
# real job (loopback), checked with promtool and against exact counts; the
# responder abused with malformed requests while the job runs; kvs_metrics()
# of the workers; KVS_METRICS_PORT errors.
# Usage: BUILD=build bash tests/ops/test-ops.sh
# Ends with "ops: N passed, N failed[, N skipped]".
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$ROOT/${BUILD:-build}
PY=/usr/bin/python3
HTTP="$PY $ROOT/tests/ops/http.py"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-ops-test.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill -KILL "$p" 2>/dev/null; done
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

pass=0 fail=0 skip=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; SHOW_LOGS=1; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
SHOW_LOGS=0

# Wait (deadline in seconds) until "$@" succeeds.
wait_for() {
    local limit=$1 i; shift
    for ((i = 0; i < limit * 50; i++)); do
        "$@" && return 0
        sleep 0.02
    done
    return 1
}
# Free TCP ports on loopback (bound and released; the daemons bind them next).
free_ports() {
    $PY -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}
# The value of one series (exact text of name{labels}) in a file, or "".
val() { awk -v k="$2 " 'index($0, k) == 1 { print $NF; exit }' "$1"; }
# Sum of one series over several files (missing = 0).
sumval() {
    local k=$1 f t=0 v; shift
    for f in "$@"; do v=$(val "$f" "$k"); t=$(( t + ${v:-0} )); done
    echo $t
}
promcheck() { promtool check metrics <"$1" >"$1.promtool" 2>&1; }

if ! command -v promtool >/dev/null; then
    echo "ops: promtool not found (Debian package prometheus; deploy/install-deps.sh installs it)"
fi

# ------------------------------------------------------------ a job with metrics
S=2 W=2 R=5
read -r P0 P1 P2 <<<"$(free_ports 3)"
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NUM_SERVER=$S DMLC_NUM_WORKER=$W
export PS_HEARTBEAT_INTERVAL=0.5 PS_HEARTBEAT_TIMEOUT=30 KVS_START_TIMEOUT=60
# every worker pushes for itself (no local group): the exact counts below are
# per worker; tests/integ/test_group.c counts a group's bytes
export KVS_LOCAL_AGG=0
unset KVS_METRICS_PORT KVS_METRICS_ADDR KVS_TRACE DMLC_ROLE
DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE=$WORK/port KVS_METRICS_PORT=$P0 \
    "$B/kvs-scheduler" 2>"$WORK/scheduler.log" &
PIDS+=($!)
wait_for 30 test -s "$WORK/port"
PORT=$(cat "$WORK/port")
for ((i = 0; i < S; i++)); do
    p=P$((i + 1))
    DMLC_ROLE=server DMLC_PS_ROOT_PORT=$PORT DMLC_SERVER_ID=$i KVS_METRICS_PORT=${!p} \
        KVS_METRICS_ADDR=127.0.0.1 "$B/kvs-server" 2>"$WORK/server$i.log" &
    PIDS+=($!)
done
WPIDS=()
for ((i = 0; i < W; i++)); do
    DMLC_ROLE=worker DMLC_PS_ROOT_PORT=$PORT DMLC_WORKER_ID=$i KVS_TRACE=$WORK/trace-%r.json \
        "$B/tests/kvs-opsworker" "$WORK" $R 2>"$WORK/worker$i.log" &
    PIDS+=($!) WPIDS+=($!)
done
ready() { local i; for ((i = 0; i < W; i++)); do [[ -e $WORK/ready-$i ]] || return 1; done; }
check "job ran $R rounds with exact sums and is waiting" wait_for 60 ready

# Scrape everything while the job is running.
$HTTP get "$P0" /metrics >"$WORK/sched.prom" 2>"$WORK/sched.err"
check "scheduler /metrics answers 200" test $? = 0
for ((i = 0; i < S; i++)); do
    p=P$((i + 1))
    $HTTP get "${!p}" /metrics >"$WORK/server$i.prom" 2>"$WORK/server$i.err"
    check "server $i /metrics answers 200" test $? = 0
done
for f in sched server0 server1 worker-0 worker-1; do
    check "promtool check metrics: $f" promcheck "$WORK/$f.prom"
done

SP=("$WORK/server0.prom" "$WORK/server1.prom")
check "servers: pushpull requests = W x R x 2 keys" \
    test "$(sumval 'kvs_requests_total{type="pushpull"}' "${SP[@]}")" = $((W * R * 2))
check "servers: init requests = W x 2 keys" \
    test "$(sumval 'kvs_requests_total{type="init"}' "${SP[@]}")" = $((W * 2))
check "servers: rounds completed = R x 2 keys" \
    test "$(sumval 'kvs_rounds_total' "${SP[@]}")" = $((R * 2))
check "servers: round and sum histograms count every round / push" eval \
    '[[ $(sumval kvs_round_seconds_count "${SP[@]}") == $((R * 2)) && $(sumval kvs_sum_seconds_count "${SP[@]}") == $((W * R * 2)) && $(sumval "kvs_round_seconds_bucket{le=\"+Inf\"}" "${SP[@]}") == $((R * 2)) ]]'
# Key 1 (1000 float32) lives on server (1 * 9973) % 2 = 1 and travels inline;
# key 2 (128 KiB) on server 0, by direct copy.  Bytes per message: the
# 88-byte header plus the body (HELLO 32 bytes, a copy descriptor 16).
# Key 2's data goes by direct copy once the worker proved it shares this
# host (HELLO, challenge, PROOF, ack); a request sent before that travels
# inline.  Either way every byte is accounted for: with k requests copied
# (k = copied bytes / 128 KiB) the rest went inline (88 + 128 KiB each).
K2=131072
# The worker's first message on each data connection, ANNOUNCE (88 bytes, no
# body: the server's connection guard), then the direct-copy handshake with
# each server: HELLO and PROOF from the worker (88 + 32 bytes each), a
# challenge (88 + 16) and an acknowledgement (88) back.
HS_IN=$((88 + 240)) HS_OUT=192 HS_MSGS=2
for ((w = 0; w < W; w++)); do
    init1=$(( 88 + (w == 0 ? 4000 : 0) ))
    check "server 1: socket bytes from worker $w exact (handshake, init, $R x 4088)" \
        test "$(val "$WORK/server1.prom" "kvs_received_bytes_total{peer=\"worker $w\",path=\"socket\"}")" = $(( HS_IN + init1 + R * 4088 ))
    sock=$(val "$WORK/server0.prom" "kvs_received_bytes_total{peer=\"worker $w\",path=\"socket\"}")
    cma=$(val "$WORK/server0.prom" "kvs_received_bytes_total{peer=\"worker $w\",path=\"cma\"}")
    out_sock=$(val "$WORK/server0.prom" "kvs_sent_bytes_total{peer=\"worker $w\",path=\"socket\"}")
    out_cma=$(val "$WORK/server0.prom" "kvs_sent_bytes_total{peer=\"worker $w\",path=\"cma\"}")
    ndata=$(( R + (w == 0 ? 1 : 0) ))   # key 2 messages with data: pushpulls, rank 0's init
    k=$(( cma / K2 )) j=$(( out_cma / K2 ))
    check "server 0: worker $w's bytes exact: handshake, init, $R pushpulls ($k of $ndata copied directly)" eval \
        '(( cma % K2 == 0 && k <= ndata && sock == HS_IN + (w == 0 ? 0 : 88) + k * 104 + (ndata - k) * (88 + K2) ))'
    check "server 0: to worker $w: handshake, init reply, $R replies ($j written directly), 1 + R timings" eval \
        '(( out_cma % K2 == 0 && j <= R && out_sock == HS_OUT + 88 + j * 88 + (R - j) * (88 + K2) + (1 + R) * 112 ))'
    check "server 0: the last rounds of worker $w went by direct copy" eval '(( k >= 1 && j >= 1 ))'
    check "worker $w and server 0 agree on every byte, both ways and both paths" eval \
        '[[ $(val "$WORK/worker-$w.prom" "kvs_sent_bytes_total{peer=\"server 0\",path=\"cma\"}") == $cma && $(val "$WORK/worker-$w.prom" "kvs_received_bytes_total{peer=\"server 0\",path=\"cma\"}") == $out_cma && $(val "$WORK/worker-$w.prom" "kvs_sent_bytes_total{peer=\"server 0\",path=\"socket\"}") == $sock && $(val "$WORK/worker-$w.prom" "kvs_received_bytes_total{peer=\"server 0\",path=\"socket\"}") == $out_sock ]]'
    check "server 1: to worker $w: handshake, init, R replies with values inline, 1 + R timings" eval \
        '[[ $(val "$WORK/server1.prom" "kvs_sent_messages_total{peer=\"worker $w\",path=\"socket\"}") == $((HS_MSGS + 1 + R + 1 + R)) && $(val "$WORK/server1.prom" "kvs_sent_bytes_total{peer=\"worker $w\",path=\"socket\"}") == $((HS_OUT + 88 + R * 4088 + (1 + R) * 112)) ]]'
    wf=$WORK/worker-$w.prom
    check "worker $w: kvs_metrics counts requests, latencies, bytes (mirror of the servers')" eval \
        '[[ $(val "$wf" "kvs_requests_total{type=\"pushpull\"}") == $((R * 2)) && $(val "$wf" "kvs_request_seconds_count{type=\"pushpull\"}") == $((R * 2)) && $(val "$wf" "kvs_sent_bytes_total{peer=\"server 1\",path=\"socket\"}") == $(val "$WORK/server1.prom" "kvs_received_bytes_total{peer=\"worker $w\",path=\"socket\"}") ]]'
done
check "servers: no errors counted, queues empty between rounds" eval \
    '! grep -q "^kvs_errors_total" "${SP[@]}" && [[ $(sumval "kvs_queue_depth{queue=\"round_pushes\"}" "${SP[@]}") == 0 && $(val "$WORK/server0.prom" "kvs_queue_depth{queue=\"keys\"}") == 1 ]]'
check "servers: scheduler heartbeat age is fresh (< 5 s)" eval \
    'awk -F" " "/^kvs_heartbeat_age_seconds\\{node=\"scheduler\"/ { if (\$2 < 0 || \$2 >= 5) bad = 1; n++ } END { exit bad || n != 2 }" "${SP[@]}"'
check "scheduler: job running, 2+2 nodes alive, R barriers" eval \
    '[[ $(val "$WORK/sched.prom" "kvs_job_state{state=\"running\"}") == 1 && $(val "$WORK/sched.prom" "kvs_nodes{role=\"worker\",state=\"alive\"}") == 2 && $(val "$WORK/sched.prom" "kvs_nodes{role=\"server\",state=\"alive\"}") == 2 && $(val "$WORK/sched.prom" kvs_barriers_total) == $R ]]'
check "scheduler: heartbeat age per node (4 series, each < 5 s)" eval \
    '[[ $(grep -c "^kvs_heartbeat_age_seconds{node=\"\(server\|worker\) [01]\",host=\"127.0.0.1\"} [0-4]\." "$WORK/sched.prom") == 4 ]]'
check "scheduler: traffic per node (worker 1 sent heartbeats and barriers)" eval \
    '(( $(val "$WORK/sched.prom" "kvs_received_messages_total{peer=\"worker 1\",path=\"socket\"}") >= R ))'

# ------------------------------------------------------------ malformed HTTP while the job runs
raw() { printf "$2" >"$WORK/raw"; $HTTP status "$1" "$WORK/raw"; }
check "GET /nothing -> 404" test "$(raw "$P1" 'GET /nothing HTTP/1.1\r\n\r\n')" = 404
check "POST /metrics -> 405" test "$(raw "$P1" 'POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc')" = 405
check "HTTP/2.0 -> 505" test "$(raw "$P1" 'GET /metrics HTTP/2.0\r\n\r\n')" = 505
check "garbage request line -> 400" test "$(raw "$P1" '\x16\x03\x01\x02\x00\x01\x00\r\n\r\n')" = 400
check "space before ':' -> 400" test "$(raw "$P1" 'GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n')" = 400
head_big=$($PY -c 'print("GET /metrics HTTP/1.1\\r\\nX: " + "a" * 9000 + "\\r\\n\\r\\n", end="")')
check "a 9 KB head -> 431" test "$(raw "$P1" "$head_big")" = 431
check "HEAD /metrics -> 200" test "$(raw "$P1" 'HEAD /metrics HTTP/1.0\r\n\r\n')" = 200
$HTTP abuse "$P1" 7 200 && $HTTP abuse "$P0" 8 100
check "after 300 abusive connections (noise, idle, oversized): still serving" eval \
    '$HTTP get "$P1" /metrics >"$WORK/server1b.prom" && $HTTP get "$P0" /metrics >"$WORK/sched2.prom" && promcheck "$WORK/server1b.prom"'
check "  ... and the counters did not move" test \
    "$(val "$WORK/server1b.prom" 'kvs_requests_total{type="pushpull"}')" = "$(val "$WORK/server1.prom" 'kvs_requests_total{type="pushpull"}')"
# Twenty idle connections hold every slot: a scraper still gets in.
(cd "$ROOT" && $PY - "$P1" <<'EOF') >"$WORK/idle.out" 2>&1
import socket, sys, subprocess
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
for s in idle:
    s.sendall(b"GET /metrics HTTP/1.1\r\n")
r = subprocess.run([sys.executable, "tests/ops/http.py", "get", str(port), "/metrics"],
                   capture_output=True, timeout=20)
print("status", r.returncode)
EOF
check "20 idle half-sent requests do not lock a scraper out" grep -qx "status 0" "$WORK/idle.out"

# ------------------------------------------------------------ the job ends cleanly
touch "$WORK/go"
wend=0
for p in "${WPIDS[@]}"; do wait "$p" || wend=1; done
check "workers exit 0 after the abuse (sums were exact)" test $wend = 0
dend=0
for ((i = 0; i <= S; i++)); do wait "${PIDS[i]}" || dend=1; done
check "scheduler and servers exit 0 at the end of the job" test $dend = 0
check "no daemon logged an error" eval '! grep -h " ERROR " "$WORK"/scheduler.log "$WORK"/server*.log'
PIDS=()

# ------------------------------------------------------------ the timelines (KVS_TRACE)
for ((w = 0; w < W; w++)); do
    check "worker $w: timeline is valid JSON with every key's events in order" \
        $PY "$ROOT/tests/ops/check-trace.py" "$WORK/trace-$w.json" "$w" "$R"
done
"$B/kvs-trace" summary --top 3 "$WORK/trace-0.json" "$WORK/trace-1.json" >"$WORK/summary" 2>&1
check "kvs-trace summary: every key operation complete, the split and the slowest keys" eval \
    'grep -q "^key operations: $((W * (2 + 2 * R))) complete, 0 incomplete (queued but never done), 0 with errors; $((W * R)) barriers; 0 events dropped" "$WORK/summary" && grep -q "waiting for other workers" "$WORK/summary" && [[ $(grep -cE "^  [01] +(pushpull|init) +[12] " "$WORK/summary") == 3 ]]'
"$B/kvs-trace" summary "$WORK/sched.prom" >"$WORK/summary2" 2>&1
rc=$?
check "kvs-trace summary of a file that is not a timeline -> exit 1, says so" eval \
    '[[ $rc == 1 ]] && grep -q "not a kvsd timeline" "$WORK/summary2"'
head -c 3000 "$WORK/trace-0.json" >"$WORK/cut.json"
check "kvs-trace reads a file cut short (a worker that died)" eval \
    '"$B/kvs-trace" summary "$WORK/cut.json" | grep -q "^key operations: "'
if (( SHOW_LOGS )); then cat "$WORK/summary"; fi

# ------------------------------------------------------------ small keys fused, workers' own ports
# Keys 11..18 (1 KiB each: even keys on server 0, odd on server 1) go in one
# call per round, so each server gets its four fused into one FUSED message.
# Each worker serves its own metrics port (KVS_METRICS_PORT) and traces.
R2=4 NKF=8
F=$WORK/fused
mkdir -p "$F"
read -r Q0 Q1 Q2 Q3 Q4 <<<"$(free_ports 5)"
DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE=$F/port \
    "$B/kvs-scheduler" 2>"$F/scheduler.log" &
PIDS+=($!)
wait_for 30 test -s "$F/port"
PORT=$(cat "$F/port")
for ((i = 0; i < S; i++)); do
    p=Q$((i + 1))
    DMLC_ROLE=server DMLC_PS_ROOT_PORT=$PORT DMLC_SERVER_ID=$i KVS_METRICS_PORT=${!p} \
        KVS_METRICS_ADDR=127.0.0.1 "$B/kvs-server" 2>"$F/server$i.log" &
    PIDS+=($!)
done
WPIDS=()
for ((i = 0; i < W; i++)); do
    p=Q$((i + 3))
    DMLC_ROLE=worker DMLC_PS_ROOT_PORT=$PORT DMLC_WORKER_ID=$i KVS_TRACE=$F/trace-%r.json \
        KVS_METRICS_PORT=${!p} KVS_METRICS_ADDR=127.0.0.1 \
        "$B/tests/kvs-opsworker" "$F" $R2 fused 2>"$F/worker$i.log" &
    PIDS+=($!) WPIDS+=($!)
done
ready() { local i; for ((i = 0; i < W; i++)); do [[ -e $F/ready-$i ]] || return 1; done; }
check "fused job ran $R2 rounds of $NKF small keys with exact sums and is waiting" wait_for 60 ready
for ((i = 0; i < W; i++)); do
    p=Q$((i + 3))
    $HTTP get "${!p}" /metrics >"$F/wport$i.prom" 2>"$F/wport$i.err"
    check "worker $i's own /metrics port answers 200" test $? = 0
    check "promtool check metrics: worker $i's own port" promcheck "$F/wport$i.prom"
    check "worker $i's port: $((R2 * NKF)) pushpulls, the same series as kvs_metrics()" eval \
        '[[ $(val "$F/wport$i.prom" "kvs_requests_total{type=\"pushpull\"}") == $((R2 * NKF)) && $(grep -c "^kvs_" "$F/wport$i.prom") == $(grep -c "^kvs_" "$F/worker-$i.prom") ]]'
done
for ((i = 0; i < S; i++)); do
    p=Q$((i + 1))
    $HTTP get "${!p}" /metrics >"$F/server$i.prom" 2>/dev/null
    check "promtool check metrics: server $i (fused job)" promcheck "$F/server$i.prom"
done
FP=("$F/server0.prom" "$F/server1.prom")
check "servers: each fused request counted by its type: pushpull = W x R x $NKF, init = W x $NKF" eval \
    '[[ $(sumval "kvs_requests_total{type=\"pushpull\"}" "${FP[@]}") == $((W * R2 * NKF)) && $(sumval "kvs_requests_total{type=\"init\"}" "${FP[@]}") == $((W * NKF)) ]]'
check "servers: FUSED messages counted too (one per worker, server and call)" eval \
    '[[ $(sumval "kvs_requests_total{type=\"fused\"}" "${FP[@]}") == $((W * S * (R2 + 1))) ]]'
touch "$F/go"
wend=0
for p in "${WPIDS[@]}"; do wait "$p" || wend=1; done
check "fused job: workers exit 0" test $wend = 0
for ((w = 0; w < W; w++)); do
    check "worker $w: fused keys' timeline has server marks for every key operation" \
        $PY "$ROOT/tests/ops/check-trace.py" "$F/trace-$w.json" "$w" "$R2" 11,12,13,14,15,16,17,18 fused
done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
PIDS=()

# ------------------------------------------------------------ configuration errors
DMLC_ROLE=server DMLC_PS_ROOT_PORT=1 KVS_METRICS_PORT=abc "$B/kvs-server" 2>"$WORK/e1"
rc=$?
check "KVS_METRICS_PORT=abc -> exit 2 naming the variable" eval '[[ $rc == 2 ]] && grep -q "KVS_METRICS_PORT='"'"'abc'"'"': expected an integer in \[0, 65535\]" "$WORK/e1"'
DMLC_ROLE=server DMLC_PS_ROOT_PORT=1 KVS_METRICS_ADDR=everywhere "$B/kvs-server" 2>"$WORK/e2"
rc=$?
check "KVS_METRICS_ADDR=everywhere -> exit 2" eval '[[ $rc == 2 ]] && grep -q "KVS_METRICS_ADDR='"'"'everywhere'"'"': expected an IPv4 address" "$WORK/e2"'
# a port in use: the scheduler says so and exits 1
$PY -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0",0)); s.listen(1)
open(sys.argv[1],"w").write(str(s.getsockname()[1])); time.sleep(30)' "$WORK/busy" &
HOLD=$!
PIDS+=($HOLD)
wait_for 10 test -s "$WORK/busy"
DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_METRICS_PORT=$(cat "$WORK/busy") timeout 20 "$B/kvs-scheduler" 2>"$WORK/e3"
rc=$?
kill "$HOLD" 2>/dev/null
check "metrics port in use -> scheduler exits 1 naming it" eval '[[ $rc == 1 ]] && grep -q "cannot serve metrics on 127.0.0.1:[0-9]*: address already in use (KVS_METRICS_PORT=" "$WORK/e3"'

if (( SHOW_LOGS )); then
    for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
fi
echo "ops: $pass passed, $fail failed, $skip skipped"
[[ $fail == 0 ]]
