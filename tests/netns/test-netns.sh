#!/usr/bin/env bash
# Multi-host tests of kvsd in network namespaces.
#
#   bash tests/netns/test-netns.sh [--long] [CASE...]      (as root)
#
# Every case builds its own "hosts": one network namespace per process (the
# scheduler, each server, each worker) plus one holding a bridge that joins
# them, with addresses that exist only inside those namespaces; egress of
# every host is shaped with tc tbf (pfifo_fast under it: its bands let control
# traffic marked low-delay pass bulk data).  Jobs run with KVS_CMA=0 (the
# namespaces share a kernel: direct copies would bypass the network) and
# PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=5.
#
# Cases: exact sums at 1 and 10 Gbit; a whole worker host, a whole server
# host, the scheduler host and one worker-server pair cut in the middle of a
# job (every process must end with an error, non-zero exit, within 15 s of
# the cut; nothing hangs, nothing is left running); 1% random loss (exact
# sums); a worker that calls kvs_close while another waits for its push; a
# worker with a different DMLC_NUM_WORKER.  Detection times are printed.
# Local groups: hosts that are their own network AND pid namespace, with
# several workers each (2 hosts x 3 workers, 1 worker beside 3, aggregation
# on and off): exact sums, local ranks, and each host's bytes per round from
# the workers' metrics (with aggregation every host moves within 5% of the
# others, whatever its number of workers); simulated-device workers
# (dist_sync_device) whose groups sum on the devices.  Replicated servers
# (KVS_REPLICAS=1) on three such hosts: a server SIGKILLed at a random
# round (plain sums and with a server optimizer) or a server host cut off:
# the job completes and its final values equal those of the same job
# without the failure.  A scheduler SIGKILLed at a random round and
# started again on its host (KVS_SCHEDULER_GRACE): the same.  Pacing
# (KVS_LINK_GBPS) on three such hosts: exact sums, and the kernel shows the
# connections to other hosts capped at their share, no other capped.
# --long: bigger jobs and arrays (make test-long).
#
# Needs root, ip netns, tc and iptables; otherwise prints one SKIP line.
# Ends with "netns: N passed, N failed[, N skipped]".  Namespaces get names
# unique to this run and are removed on exit, even on failure.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LONG=0
CASES=()
for a in "$@"; do
    case $a in
    --long) LONG=1 ;;
    -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test-netns: unknown option $a" >&2; exit 2 ;;
    *) CASES+=("$a") ;;
    esac
done

skip_all() {
    echo "SKIP: netns suite: $*"
    echo "netns: 0 passed, 0 failed, 1 skipped"
    exit 0
}
[[ $(id -u) == 0 ]] || skip_all "needs root (network namespaces)"
for c in ip tc iptables; do
    command -v $c >/dev/null 2>&1 || skip_all "needs $c (deploy/install-deps.sh installs iproute2 and iptables)"
done
RUN=kvn$$x$RANDOM   # every namespace of this run starts with it
ip netns add "$RUN-probe" 2>/dev/null && ip netns del "$RUN-probe" 2>/dev/null ||
    skip_all "'ip netns add' does not work here (no CAP_SYS_ADMIN or no netns support)"
ip netns add "$RUN-probe" &&
    ip netns exec "$RUN-probe" iptables -A INPUT -m statistic --mode random --probability 0.01 -j DROP 2>/dev/null
probe=$?
ip netns del "$RUN-probe" 2>/dev/null
(( probe == 0 )) || skip_all "iptables with the statistic match does not work in a namespace"
for b in kvs-scheduler kvs-server kvs-bench tests/kvs-testworker tests/kvs-replworker; do
    [[ -x $BUILD/$b ]] || { echo "netns: $BUILD/$b missing (run make)"; echo "netns: 0 passed, 1 failed"; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-netns.XXXXXX")
pass=0 fail=0
NSES=()          # namespaces of the current case
declare -A PID RC TEND IP NSOF
WENV=()
NAMES=()

ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $(( 10#$t / 1000 )); }

# Kill whatever still runs in our namespaces and delete them.
teardown() {
    local ns p
    for ns in "${NSES[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    for n in "${NAMES[@]}"; do
        [[ -n ${PID[$n]:-} ]] && { kill -KILL "${PID[$n]}" 2>/dev/null; wait "${PID[$n]}" 2>/dev/null; }
    done
    for ns in "${NSES[@]}"; do ip netns del "$ns" 2>/dev/null; done
    NSES=()
}
final_cleanup() {
    teardown
    # anything of this run left over (a case interrupted half way)
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$RUN-"); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap final_cleanup EXIT
trap 'exit 130' INT TERM

# net RATE HOST...: a bridge namespace and one namespace per host, each host
# at 10.201.0.(10+i)/24 on eth0, egress shaped to RATE (a tbf queue of at most
# $QLAT of data, 20ms unless set).
net() {
    local rate=$1 i=0 h ns br=$RUN-$CASE-br
    shift
    ip netns add "$br" || return 1
    NSES+=("$br")
    ip -n "$br" link add br0 type bridge || return 1
    ip -n "$br" link set br0 up
    ip -n "$br" link set lo up
    for h in "$@"; do
        ns=$RUN-$CASE-$h
        ip netns add "$ns" || return 1
        NSES+=("$ns")
        NSOF[$h]=$ns
        IP[$h]=10.201.0.$((10 + i))
        ip -n "$ns" link add eth0 type veth peer name "v$i" netns "$br" || return 1
        ip -n "$br" link set "v$i" master br0
        ip -n "$br" link set "v$i" up
        ip -n "$ns" addr add "${IP[$h]}/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "$rate" burst 512kb latency "${QLAT:-20ms}" || return 1
        ip netns exec "$ns" tc qdisc add dev eth0 parent 1:1 handle 10: pfifo_fast || return 1
        i=$((i + 1))
    done
}

# spawn NAME HOST VAR=VALUE... -- CMD ARGS...: run CMD in HOST's namespace
# with only the given environment; output to $DIR/NAME.log.
spawn() {
    local name=$1 host=$2 envv=()
    shift 2
    while [[ $1 != -- ]]; do envv+=("$1"); shift; done
    shift
    ip netns exec "${NSOF[$host]}" env -i PATH="$PATH" "${JOBENV[@]}" "${envv[@]}" \
        DMLC_NODE_HOST="${IP[$host]}" KVS_TEST_DIR="$DIR" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
    PID[$name]=$!
    NAMES+=("$name")
}

gone() { # pid: exited (zombie or reaped)?
    local st
    [[ -r /proc/$1/stat ]] || return 0
    read -r st <"/proc/$1/stat" 2>/dev/null || return 0
    st=${st##*) }
    [[ ${st:0:1} == Z ]]
}

# wait_all DEADLINE_MS NAME...: reap the named processes until the deadline;
# RC[name] and TEND[name] (ms) for those that ended.  1 if some still run.
wait_all() {
    local end=$1 n left
    shift
    while :; do
        left=0
        for n in "$@"; do
            [[ -n ${RC[$n]:-} ]] && continue
            if gone "${PID[$n]}"; then
                wait "${PID[$n]}"; RC[$n]=$?; TEND[$n]=$(ms)
            else
                left=1
            fi
        done
        (( left )) || return 0
        (( $(ms) < end )) || return 1
        sleep 0.05
    done
}

# Start a job of S servers and W workers on hosts sched, s0.., w0..; workers
# run WORKER_CMD (an array), worker i with the extra NAME=VALUE words WENV[i].
start_job() {
    local S=$1 W=$2 i t0 port=
    spawn sched sched DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE="$DIR/sched.port" -- "$BUILD/kvs-scheduler"
    t0=$(ms)
    while [[ ! -s $DIR/sched.port ]]; do
        (( $(ms) - t0 < 10000 )) || { note "scheduler did not report its port in 10 s"; return 1; }
        gone "${PID[sched]}" && { note "scheduler exited at start"; return 1; }
        sleep 0.02
    done
    read -r port <"$DIR/sched.port"
    JOBENV+=(DMLC_PS_ROOT_PORT="$port")
    for ((i = 0; i < S; i++)); do
        spawn "s$i" "s$i" DMLC_ROLE=server DMLC_SERVER_ID=$i -- "$BUILD/kvs-server"
    done
    for ((i = 0; i < W; i++)); do
        # shellcheck disable=SC2086 # WENV[i]: blank-separated NAME=VALUE words
        spawn "w$i" "w$i" DMLC_ROLE=worker DMLC_WORKER_ID=$i ${WENV[$i]:-} -- "${WORKER_CMD[@]}"
    done
}

job_env() { # S W
    JOBENV=(DMLC_PS_ROOT_URI="${IP[sched]}" DMLC_NUM_SERVER="$1" DMLC_NUM_WORKER="$2"
            KVS_CMA=0 PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=5 PS_VERBOSE=1
            KVS_START_TIMEOUT=30 MXNET_KVSTORE_BIGARRAY_BOUND=100000)
}

MSGS=()
note() { MSGS+=("$*"); }

# ok/bad for the current case
finish_case() {
    local n
    if (( ${#MSGS[@]} == 0 )); then
        pass=$((pass + 1)); echo "ok   - $CASE${SUMMARY:+: $SUMMARY}"
    else
        fail=$((fail + 1)); echo "FAIL - $CASE${SUMMARY:+: $SUMMARY}"
        for n in "${MSGS[@]}"; do echo "  $n"; done
        for n in "${NAMES[@]}"; do
            echo "  --- $n.log (exit ${RC[$n]:-running})"
            tail -n 12 "$DIR/$n.log" 2>/dev/null | sed 's/^/    | /'
        done
    fi
}

# No process of the case may be left in its namespaces.
check_orphans() {
    local ns p left=
    for ns in "${NSES[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            left+=" $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | cut -c1-60)[$p]"
        done
    done
    [[ -z $left ]] || note "left running:$left"
}

new_case() {
    CASE=$1
    DIR=$WORK/$CASE
    mkdir -p "$DIR"
    MSGS=() NAMES=() SUMMARY=
    PID=() RC=() TEND=() IP=() NSOF=() WENV=()
}

want() { # case selected?
    (( ${#CASES[@]} == 0 )) && return 0
    local c
    for c in "${CASES[@]}"; do [[ $c == "$1" ]] && return 0; done
    return 1
}

hosts_for() { # S W -> host names
    local i h=(sched)
    for ((i = 0; i < $1; i++)); do h+=("s$i"); done
    for ((i = 0; i < $2; i++)); do h+=("w$i"); done
    echo "${h[@]}"
}

# ---------------------------------------------------------------- cases

# Exact sums over the network; every process exits 0.
case_sums() { # name rate S W counts rounds [loss [queue latency]]
    local name=$1 rate=$2 S=$3 W=$4 counts=$5 rounds=$6 loss=${7:-} QLAT=${8:-20ms} n h t0
    want "$name" || return 0
    new_case "$name"
    net "$rate" $(hosts_for "$S" "$W") || { note "cannot build the namespaces"; finish_case; teardown; return; }
    if [[ -n $loss ]]; then
        for h in $(hosts_for "$S" "$W"); do
            ip netns exec "${NSOF[$h]}" iptables -A INPUT -m statistic --mode random \
                --probability "$loss" -j DROP
        done
    fi
    job_env "$S" "$W"
    WORKER_CMD=("$BUILD/tests/kvs-testworker" sum --dtype f32,i64 --counts "$counts" --rounds "$rounds" --pushpull)
    t0=$(ms)
    start_job "$S" "$W" || { finish_case; teardown; return; }
    local all=("${NAMES[@]}")
    wait_all $((t0 + (LONG ? 600000 : 120000))) "${all[@]}" || note "still running after $((LONG ? 600 : 120)) s"
    for n in "${all[@]}"; do
        [[ ${RC[$n]:-x} == 0 ]] || note "$n: exit ${RC[$n]:-running} (expected 0)"
    done
    for ((i = 0; i < W; i++)); do
        grep -q "MISMATCH" "$DIR/w$i.log" && note "w$i: wrong sums"
    done
    SUMMARY="$W workers x $S servers, $rounds rounds of $counts f32+i64 elements, $(( ($(ms) - t0) )) ms"
    if [[ -n $loss ]]; then
        local drops=0 d
        for h in $(hosts_for "$S" "$W"); do
            d=$(ip netns exec "${NSOF[$h]}" iptables -L INPUT -v -x -n | awk '/statistic/{s+=$1} END{print s+0}')
            drops=$((drops + d))
        done
        SUMMARY+=", $drops packets dropped"
        (( drops > 0 )) || note "the loss rule dropped nothing"
    fi
    check_orphans
    finish_case
    teardown
}

# wait until host $1 has sent at least $2 bytes (the job is under way)
wait_tx() {
    local h=$1 want=$2 t0 tx
    t0=$(ms)
    while :; do
        tx=$(ip -n "${NSOF[$h]}" -s link show eth0 2>/dev/null | awk '/TX:/{getline; print $1; exit}')
        (( ${tx:-0} >= want )) && return 0
        (( $(ms) - t0 < 30000 )) || { note "$h sent only ${tx:-0} bytes in 30 s: the job did not start"; return 1; }
        for n in "${NAMES[@]}"; do
            gone "${PID[$n]}" && { note "$n exited before the cut"; return 1; }
        done
        sleep 0.05
    done
}

# A cut in the middle of a running job: every process ends non-zero within
# 15 s of the cut, each one's detection time is reported.
case_cut() { # name what
    local name=$1 what=$2 S=2 W=2 n t_cut worst=0 line
    want "$name" || return 0
    new_case "$name"
    net 1gbit $(hosts_for $S $W) || { note "cannot build the namespaces"; finish_case; teardown; return; }
    job_env $S $W
    WORKER_CMD=("$BUILD/kvs-bench" --sizes 1M --ops pushpull --iters 100000000 --warmup 1)
    start_job $S $W || { finish_case; teardown; return; }
    local all=("${NAMES[@]}")
    wait_tx w0 $((20 << 20)) && wait_tx w1 $((20 << 20)) || { finish_case; teardown; return; }
    t_cut=$(ms)
    case $what in
    worker) ip -n "${NSOF[w1]}" link set eth0 down ;;
    server) ip -n "${NSOF[s1]}" link set eth0 down ;;
    scheduler) ip -n "${NSOF[sched]}" link set eth0 down ;;
    pair) # worker 0 and server 1 lose each other; both still reach everyone else
        ip netns exec "${NSOF[w0]}" iptables -A INPUT -s "${IP[s1]}" -j DROP
        ip netns exec "${NSOF[w0]}" iptables -A OUTPUT -d "${IP[s1]}" -j DROP ;;
    esac
    wait_all $((t_cut + 15000)) "${all[@]}" || note "still running 15 s after the cut"
    SUMMARY="detection (exit after the cut):"
    for n in "${all[@]}"; do
        if [[ -z ${RC[$n]:-} ]]; then
            SUMMARY+=" $n=HUNG"
            continue
        fi
        local dt=$(( TEND[$n] - t_cut ))
        (( dt > worst )) && worst=$dt
        SUMMARY+=" $n=$(printf '%d.%01d' $((dt / 1000)) $((dt % 1000 / 100)))s/rc${RC[$n]}"
        [[ ${RC[$n]} != 0 ]] || note "$n exited 0 after the cut (expected an error)"
        line=$(grep -E "ERROR|WARN|KVS_E" "$DIR/$n.log" | grep -v "INFO" | tail -n 1)
        [[ -n $line ]] || note "$n: no error reported in its log"
    done
    case $what in
    pair) grep -q "lost its connection to server 1" "$DIR/w0.log" "$DIR/w1.log" "$DIR/sched.log" ||
              note "no process names the two ends (worker 0, server 1)" ;;
    esac
    check_orphans
    finish_case
    teardown
}

# Worker 1 calls kvs_close while worker 0 waits for its push.
case_leave() {
    local n t0
    want leave || return 0
    new_case leave
    net 1gbit $(hosts_for 2 2) || { note "cannot build the namespaces"; finish_case; teardown; return; }
    job_env 2 2
    # the two workers run different scenarios: the job is started by hand
    local S=2 W=2 port i
    spawn sched sched DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE="$DIR/sched.port" -- "$BUILD/kvs-scheduler"
    t0=$(ms)
    while [[ ! -s $DIR/sched.port ]] && (( $(ms) - t0 < 10000 )); do sleep 0.02; done
    read -r port <"$DIR/sched.port" || { note "no scheduler port"; finish_case; teardown; return; }
    JOBENV+=(DMLC_PS_ROOT_PORT="$port")
    for ((i = 0; i < S; i++)); do spawn "s$i" "s$i" DMLC_ROLE=server DMLC_SERVER_ID=$i -- "$BUILD/kvs-server"; done
    spawn w0 w0 DMLC_ROLE=worker DMLC_WORKER_ID=0 -- "$BUILD/tests/kvs-testworker" peer-dead --block pull --left
    spawn w1 w1 DMLC_ROLE=worker DMLC_WORKER_ID=1 -- "$BUILD/tests/kvs-testworker" leave
    local all=("${NAMES[@]}")
    t0=$(ms)
    while [[ ! -e $DIR/ready-w0 || ! -e $DIR/ready-w1 ]]; do
        (( $(ms) - t0 < 30000 )) || { note "workers not ready in 30 s"; break; }
        sleep 0.02
    done
    local r1; read -r r1 <"$DIR/ready-w1" 2>/dev/null
    echo "worker ${r1:-1}" >"$DIR/expect-dead"
    t0=$(ms)
    echo 1 >"$DIR/go"
    wait_all $((t0 + 15000)) "${all[@]}" || note "still running 15 s after the departure"
    for n in "${all[@]}"; do
        [[ ${RC[$n]:-x} == 0 ]] || note "$n: exit ${RC[$n]:-running} (expected 0)"
    done
    if [[ -n ${TEND[w0]:-} ]]; then
        local dt=$(( TEND[w0] - t0 ))
        SUMMARY="the waiting worker got its error ${dt} ms after the other's kvs_close"
        (( dt < 3000 )) || note "worker 0 took $dt ms (more than 3 s)"
    fi
    check_orphans
    finish_case
    teardown
}

# One worker says DMLC_NUM_WORKER=3 in a job of 2.
case_mismatch() {
    local n t0
    want mismatch || return 0
    new_case mismatch
    net 1gbit $(hosts_for 1 2) || { note "cannot build the namespaces"; finish_case; teardown; return; }
    job_env 1 2
    WENV[1]=DMLC_NUM_WORKER=3
    WORKER_CMD=("$BUILD/tests/kvs-testworker" create-error KVS_ECONFIG "job size mismatch")
    t0=$(ms)
    start_job 1 2 || { finish_case; teardown; return; }
    local all=("${NAMES[@]}")
    wait_all $((t0 + 15000)) "${all[@]}" || note "still running 15 s after the start"
    for n in w0 w1; do [[ ${RC[$n]:-x} == 0 ]] || note "$n: exit ${RC[$n]:-running} (expected 0: KVS_ECONFIG naming the mismatch)"; done
    for n in s0 sched; do
        [[ ${RC[$n]:-0} != 0 ]] || note "$n: exit ${RC[$n]:-running} (expected non-zero)"
        grep -q "job size mismatch" "$DIR/$n.log" || note "$n does not name the cause"
    done
    grep -q "you say 3 workers/1 servers, the job has 2 workers/1 servers" "$DIR/w1.log" ||
        note "the odd worker is not told both sizes"
    SUMMARY="workers told in $(( ${TEND[w0]:-0} - t0 )) / $(( ${TEND[w1]:-0} - t0 )) ms from the start"
    check_orphans
    finish_case
    teardown
}

# ------------------------------------------------------------ hosts of several processes
# A host here is a network namespace AND its own pid namespace (ip netns exec
# NS unshare --pid --fork --mount-proc), as a real machine is: the workers of
# one host form a local group (docs/guide/local-groups.md), no direct copy can
# cross hosts, and KVS_CMA stays on.

# host_job L... : hosts h0.. with L workers each (W = sum); the scheduler on
# h0, server i on host i mod H ($SERVERS servers); workers run WORKER_CMD with
# WORKER_ENV; every process's exit status lands in $DIR/rc-NAME.
host_job() {
    local nh=$# h i w=0 W=0 L
    for L in "$@"; do W=$((W + L)); done
    HOSTS_L=("$@") HW=$W
    for ((h = 0; h < nh; h++)); do
        local sc=$DIR/host-h$h.sh
        {
            echo "cd $(printf '%q' "$DIR")"
            printf 'export %q\n' "${JOBENV[@]}" DMLC_NODE_HOST="${IP[h$h]}" KVS_TEST_DIR="$DIR"
            echo 'run() { local n=$1; shift; ( "$@" >"$n.log" 2>&1 </dev/null; echo $? >"rc-$n.tmp"; mv "rc-$n.tmp" "rc-$n" ) & }'
            if (( h == 0 )); then
                echo "DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE=sched.port run sched $(printf '%q' "$BUILD/kvs-scheduler")"
            fi
            echo 'for i in $(seq 400); do [ -s sched.port ] && break; sleep 0.05; done'
            echo 'export DMLC_PS_ROOT_PORT=$(cat sched.port)'
            for ((i = 0; i < SERVERS; i++)); do
                (( i % nh == h )) || continue
                echo "DMLC_ROLE=server DMLC_SERVER_ID=$i run s$i $(printf '%q' "$BUILD/kvs-server")"
            done
            for ((i = 0; i < ${HOSTS_L[h]}; i++)); do
                echo "DMLC_ROLE=worker DMLC_WORKER_ID=$w ${WORKER_ENV:-} run w$w $(printf '%q ' "${WORKER_CMD[@]}")"
                w=$((w + 1))
            done
            if (( h == 0 )) && [[ ${SCHED_RESTART:-0} == 1 ]]; then
                # the case kills the scheduler, then asks for another on its port
                echo 'for i in $(seq 2400); do [ -e restart-sched ] && break; sleep 0.05; done'
                echo "[ -e restart-sched ] && DMLC_ROLE=scheduler run sched2 $(printf '%q' "$BUILD/kvs-scheduler")"
            fi
            echo 'wait'
        } >"$sc"
        ip netns exec "${NSOF[h$h]}" unshare --pid --fork --mount-proc env -i PATH="$PATH" bash "$sc" \
            2>"$DIR/host-h$h.err" &
        PID[h$h]=$!
        NAMES+=("h$h")
    done
}

# wait_rcs DEADLINE_MS NAME...: until every $DIR/rc-NAME exists; 1 if not.
wait_rcs() {
    local end=$1 n missing
    shift
    while :; do
        missing=0
        for n in "$@"; do [[ -e $DIR/rc-$n ]] || missing=1; done
        (( missing )) || return 0
        (( $(ms) < end )) || return 1
        sleep 0.1
    done
}

# layout_net "L...": hosts h0.. at 1 Gbit for a case's layout (LS: the
# workers per host, HW: their sum); 1, the case finished, if the
# namespaces cannot be built.
layout_net() {
    local h hs=()
    read -ra LS <<<"$1"
    HW=0
    for ((h = 0; h < ${#LS[@]}; h++)); do hs+=("h$h"); HW=$((HW + LS[h])); done
    net 1gbit "${hs[@]}" || { note "cannot build the namespaces"; finish_case; teardown; return 1; }
}

# host_job_ok S L... : host_job L..., then wait (180 s at most) for every
# process (the scheduler, S servers, the workers) and note each that did not
# exit 0.
host_job_ok() {
    local S=$1 n i names=(sched) t0
    shift
    t0=$(ms)
    host_job "$@"
    for ((i = 0; i < S; i++)); do names+=("s$i"); done
    for ((i = 0; i < HW; i++)); do names+=("w$i"); done
    wait_rcs $((t0 + 180000)) "${names[@]}" || note "still running after 180 s"
    for n in "${names[@]}"; do
        [[ $(cat "$DIR/rc-$n" 2>/dev/null) == 0 ]] || note "$n: exit $(cat "$DIR/rc-$n" 2>/dev/null || echo running) (expected 0)"
    done
}

# Exact sums on hosts of several workers each, local groups summing, and the
# bytes each host's workers exchanged with the servers per round.
case_groups() { # name "L..." S [KVS_LOCAL_AGG]
    local name=$1 layout=$2 S=$3 agg=${4:-1} h i W L
    want "$name" || return 0
    new_case "$name"
    layout_net "$layout" || return
    W=$HW
    JOBENV=(DMLC_PS_ROOT_URI="${IP[h0]}" DMLC_NUM_SERVER="$S" DMLC_NUM_WORKER="$W"
            PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=20 PS_VERBOSE=1 KVS_START_TIMEOUT=60
            MXNET_KVSTORE_BIGARRAY_BOUND=100000 KVS_LOCAL_AGG="$agg" KVS_TEST_METRICS=1)
    SERVERS=$S WORKER_ENV=
    WORKER_CMD=("$BUILD/tests/kvs-testworker" sum --dtype f32,i64 --counts 1000,300000,700001 --rounds 3 --pushpull)
    local t0=$(ms)
    host_job_ok "$S" "${LS[@]}"
    for ((i = 0; i < W; i++)); do
        grep -q "MISMATCH" "$DIR/w$i.log" && note "w$i: wrong sums"
    done
    # each host's workers: their local group, and the bytes of their rounds
    local w=0 per=()
    for ((h = 0; h < ${#LS[@]}; h++)); do
        local bytes=0 r
        for ((i = 0; i < LS[h]; i++, w++)); do
            grep -q "local rank $i of ${LS[h]}" "$DIR/w$w.log" || note "w$w: not local rank $i of ${LS[h]}"
            if (( agg && LS[h] > 1 )); then
                grep -q "summing locally" "$DIR/w$w.log" || note "w$w did not sum in its group"
            fi
            [[ -s $DIR/bytes-$w && -s $DIR/init-bytes-$w ]] || note "w$w wrote no byte counts"
            r=$(awk 'NR==FNR { a += $1 + $2; next } { b += $1 + $2 } END { printf "%.0f", a - b }' \
                "$DIR/bytes-$w" "$DIR/init-bytes-$w" 2>/dev/null)
            bytes=$((bytes + ${r:-0}))
        done
        per+=("h$h(${LS[h]}w)=$((bytes / 3))B")
        eval "HB_$h=$bytes"
    done
    SUMMARY="hosts of ${LS[*]} workers x $S servers (KVS_LOCAL_AGG=$agg), bytes per round per host: ${per[*]}, $(( $(ms) - t0 )) ms"
    if (( agg )); then # every host moves about what a host of one worker moves
        local b0=$HB_0 hh
        for ((h = 1; h < ${#LS[@]}; h++)); do
            hh=HB_$h
            (( ${!hh} * 100 <= b0 * 105 && b0 * 100 <= ${!hh} * 105 )) ||
                note "h$h moved ${!hh} bytes in its rounds, h0 $b0 (more than 5% apart)"
        done
    fi
    check_orphans
    finish_case
    teardown
}

# ------------------------------------------------------------ pacing
# Three hosts (network and pid namespaces), a worker and a server on each,
# KVS_LINK_GBPS=1 and direct copies on (the default): each worker paces its
# connections to the two servers on other hosts at 500 Mbit/s, each server
# its connections to the two workers on other hosts; the connections within
# a host and those to the scheduler are not paced.  Exact sums; while the
# job runs, the kernel's view of host h1's connections (ss) shows the caps.
case_pacing() { # name
    local name=$1 t0 seen=$WORK/$1/ss.txt ip1 n
    want "$name" || return 0
    new_case "$name"
    layout_net "1 1 1" || return
    JOBENV=(DMLC_PS_ROOT_URI="${IP[h0]}" DMLC_NUM_SERVER=3 DMLC_NUM_WORKER=3
            PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=20 PS_VERBOSE=1 KVS_START_TIMEOUT=60
            MXNET_KVSTORE_BIGARRAY_BOUND=100000 KVS_LINK_GBPS=1)
    SERVERS=3 WORKER_ENV=
    WORKER_CMD=("$BUILD/tests/kvs-testworker" sum --dtype f32 --counts 1000,3000000 --rounds 20 --pushpull)
    t0=$(ms)
    host_job 1 1 1
    # each socket on one line: "local peer ... pacing_rate X/CAP ..."
    while ! wait_rcs 0 w0 w1 w2 && (( $(ms) - t0 < 180000 )); do
        ip netns exec "${NSOF[h1]}" ss -tinH 2>/dev/null |
            awk '/^[A-Z]/ { if (l != "") print l; l = $4 " " $5; next } { l = l " " $0 } END { if (l != "") print l }' >>"$seen"
        sleep 0.1
    done
    wait_rcs $((t0 + 180000)) sched s0 s1 s2 w0 w1 w2 || note "still running after 180 s"
    for n in sched s0 s1 s2 w0 w1 w2; do
        [[ $(cat "$DIR/rc-$n" 2>/dev/null) == 0 ]] || note "$n: exit $(cat "$DIR/rc-$n" 2>/dev/null || echo running) (expected 0)"
    done
    for n in 0 1 2; do
        grep -q "MISMATCH" "$DIR/w$n.log" && note "w$n: wrong sums"
        grep -q "pacing the connections to 2 servers on other hosts at 500 Mbit/s each" "$DIR/w$n.log" ||
            note "w$n did not pace its 2 servers on other hosts at 500 Mbit/s"
        grep -q "pacing the connections to 2 workers on other hosts at 500 Mbit/s each" "$DIR/s$n.log" ||
            note "s$n did not pace its 2 workers on other hosts at 500 Mbit/s"
    done
    ip1=${IP[h1]}
    # h1's connections to the other hosts' worker and server (not the
    # scheduler's port) capped; none to its own address capped
    local sport capped local_capped
    read -r sport <"$DIR/sched.port"
    capped=$(awk -v me="$ip1" -v sp="$sport" '{ split($2, p, ":") } p[1] != me && p[2] != sp && /pacing_rate [^ ]*\/500000000bps/ { print $1, $2 }' "$seen" | sort -u | wc -l)
    local_capped=$(awk -v me="$ip1" -v sp="$sport" '{ split($2, p, ":") } (p[1] == me || p[2] == sp) && /pacing_rate [^ ]*\/[0-9]+bps/ { print $1, $2 }' "$seen" | sort -u | wc -l)
    (( capped >= 4 )) || note "h1: $capped connections to other hosts were seen capped at 500 Mbit/s (expected 4: w1 to s0 and s2, s1 to w0 and w2)"
    (( local_capped == 0 )) || note "h1: $local_capped connections within the host or to the scheduler were capped"
    SUMMARY="3 hosts of a worker and a server, KVS_LINK_GBPS=1: $capped connections of h1 to other hosts seen paced at 500 Mbit/s, $local_capped others, $(( $(ms) - t0 )) ms"
    check_orphans
    finish_case
    teardown
}

# ------------------------------------------------------------ replicated servers
# Three hosts (network AND pid namespaces), a server on each, the scheduler
# and worker 0 on h0, worker 1 on h1; KVS_REPLICAS=1, KVS_CMA=0.  The same
# job (kvs-replworker: 40 keys, fused, middle and split ones) runs twice:
# once whole, once with one server SIGKILLed at a random round.  The killed
# job completes: every worker and the surviving daemons exit 0, no round
# stalls past PS_HEARTBEAT_TIMEOUT + 2 s, plain sums are exact every round
# (checked in the workers) and the final values equal the whole job's, byte
# for byte (with SPEC: the servers run that optimizer, and its weights).
# HOW=cut: instead of the kill, host h2 (its server only) loses its link:
# the others learn of it by heartbeat, and the cut server must end too.

# repl_job NAME VICTIM MARK: one job in $DIR/NAME; VICTIM >= 0: SIGKILL the
# server on host VICTIM once worker 0 passed round MARK.
repl_job() {
    local name=$1 victim=$2 mark=$3 n p t0 names=(sched s0 s1 s2 w0 w1)
    local base=$DIR
    DIR=$base/$name
    mkdir -p "$DIR"
    WORKER_CMD=("$BUILD/tests/kvs-replworker" train --rounds "$ROUNDS" --mark "$mark" --max-stall 4
                --scale "$SCALE" --out out ${SPEC:+--spec "$SPEC"})
    local limit=$(( LONG ? 900 : 120 ))
    t0=$(ms)
    host_job 1 1 0
    if (( victim >= 0 )); then
        while [[ ! -e $DIR/mark-w0 ]]; do
            (( $(ms) - t0 < limit * 500 )) || { note "$name: worker 0 did not reach round $mark in $((limit / 2)) s"; break; }
            sleep 0.02
        done
        if [[ ${HOW:-kill} == cut ]]; then
            ip -n "${NSOF[h$victim]}" link set eth0 down
        else
            for p in $(ip netns pids "${NSOF[h$victim]}" 2>/dev/null); do
                [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") == *kvs-server* ]] && kill -KILL "$p"
            done
        fi
    fi
    wait_rcs $((t0 + limit * 1000)) "${names[@]}" || note "$name: still running after $limit s"
    for n in "${names[@]}"; do
        [[ $n == "s$victim" ]] && continue
        [[ $(cat "$DIR/rc-$n" 2>/dev/null) == 0 ]] ||
            note "$name: $n exit $(cat "$DIR/rc-$n" 2>/dev/null || echo running) (expected 0)"
    done
    if (( victim >= 0 )); then
        if [[ ${HOW:-kill} == cut ]]; then
            [[ $(cat "$DIR/rc-s$victim" 2>/dev/null) =~ ^[1-9][0-9]*$ ]] ||
                note "$name: the cut server $victim exit $(cat "$DIR/rc-s$victim" 2>/dev/null || echo running) (expected an error)"
        else
            [[ $(cat "$DIR/rc-s$victim" 2>/dev/null) == 137 ]] || note "$name: server $victim was not killed"
        fi
        grep -q "we own its" "$DIR/s$(( (victim + 1) % 3 )).log" ||
            note "$name: server $(( (victim + 1) % 3 )) (the heir) did not take server $victim's keys"
    fi
    DIR=$base
}

case_replica() { # name [optimizer spec [kill|cut]]
    local name=$1 w HOW=${3:-kill}
    want "$name" || return 0
    new_case "$name"
    # --long: 64 MiB over the 40 keys, on 10 Gbit links
    net "$( (( LONG )) && echo 10gbit || echo 1gbit)" h0 h1 h2 ||
        { note "cannot build the namespaces"; finish_case; teardown; return; }
    JOBENV=(DMLC_PS_ROOT_URI="${IP[h0]}" DMLC_NUM_SERVER=3 DMLC_NUM_WORKER=2 KVS_CMA=0
            PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=2 PS_VERBOSE=1 KVS_START_TIMEOUT=30
            MXNET_KVSTORE_BIGARRAY_BOUND=1000 KVS_REPLICAS=1)
    SERVERS=3 WORKER_ENV= SPEC=${2:-}
    local victim=$((RANDOM % 3)) mark=$((10 + RANDOM % (LONG ? 240 : 60))) t0=$(ms)
    [[ $HOW == cut ]] && victim=2
    repl_job whole -1 -1
    repl_job killed "$victim" "$mark"
    for w in 0 1; do
        cmp -s "$DIR/whole/out-w$w" "$DIR/killed/out-w$w" ||
            note "worker $w's final values differ from the whole job's ($(cmp "$DIR/whole/out-w$w" "$DIR/killed/out-w$w" 2>&1 | head -n 1))"
    done
    SUMMARY="server $victim $([[ $HOW == cut ]] && echo cut off || echo killed) after round $mark of $ROUNDS${SPEC:+ ($SPEC)}: $(grep -ho 'slowest round [0-9]* took [0-9.]* s' "$DIR/killed/w0.log" | head -n 1), $(( $(ms) - t0 )) ms for both jobs"
    check_orphans
    finish_case
    teardown
}

# ------------------------------------------------------------ a restarted scheduler
# The replicated servers' layout without replicas, KVS_SCHEDULER_GRACE=30:
# the scheduler (on h0) is SIGKILLed at a random round and, once every
# worker says it goes on without it, a new one is started on h0 at its port.
# Every node rejoins it across the hosts, the killed job completes (barriers
# every 50 rounds wait for the new scheduler), every process but the killed
# scheduler exits 0, the sums are exact every round, and the final values
# equal the whole job's, byte for byte.

# sched_job NAME MARK: one job in $DIR/NAME; MARK >= 0: kill the scheduler
# once worker 0 passed round MARK, and restart it.
sched_job() {
    local name=$1 mark=$2 n p t0 names=(s0 s1 s2 w0 w1) base=$DIR limit=120
    DIR=$base/$name
    mkdir -p "$DIR"
    WORKER_CMD=("$BUILD/tests/kvs-replworker" train --rounds "$ROUNDS" --mark "$mark"
                --barrier-every 50 --out out)
    t0=$(ms)
    SCHED_RESTART=$(( mark >= 0 )) host_job 1 1 0
    if (( mark >= 0 )); then
        names+=(sched2)
        while [[ ! -e $DIR/mark-w0 ]]; do
            (( $(ms) - t0 < limit * 500 )) || { note "$name: worker 0 did not reach round $mark"; break; }
            sleep 0.02
        done
        for p in $(ip netns pids "${NSOF[h0]}" 2>/dev/null); do
            [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") == *kvs-scheduler* ]] && kill -KILL "$p"
        done
        wait_rcs $((t0 + limit * 1000)) sched || note "$name: the scheduler did not die"
        for n in w0 w1 s0 s1 s2; do
            while ! grep -q "going on without it" "$DIR/$n.log" 2>/dev/null; do
                (( $(ms) - t0 < limit * 1000 )) || { note "$name: $n does not go on without the scheduler"; break; }
                sleep 0.05
            done
        done
        : >"$DIR/restart-sched"
    else
        names+=(sched)
    fi
    wait_rcs $((t0 + limit * 1000)) "${names[@]}" || note "$name: still running after $limit s"
    for n in "${names[@]}"; do
        [[ $(cat "$DIR/rc-$n" 2>/dev/null) == 0 ]] ||
            note "$name: $n exit $(cat "$DIR/rc-$n" 2>/dev/null || echo running) (expected 0)"
    done
    if (( mark >= 0 )); then
        [[ $(cat "$DIR/rc-sched" 2>/dev/null) == 137 ]] || note "$name: the scheduler was not killed"
        grep -q "3 servers and 2 workers rejoined" "$DIR/sched2.log" ||
            note "$name: the new scheduler does not say every node rejoined"
    fi
    DIR=$base
}

case_sched_restart() { # name
    local name=$1 w
    want "$name" || return 0
    new_case "$name"
    net 1gbit h0 h1 h2 || { note "cannot build the namespaces"; finish_case; teardown; return; }
    JOBENV=(DMLC_PS_ROOT_URI="${IP[h0]}" DMLC_NUM_SERVER=3 DMLC_NUM_WORKER=2 KVS_CMA=0
            PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=2 PS_VERBOSE=1 KVS_START_TIMEOUT=30
            MXNET_KVSTORE_BIGARRAY_BOUND=1000 KVS_SCHEDULER_GRACE=30)
    SERVERS=3 WORKER_ENV=
    local mark=$((10 + RANDOM % 60)) t0=$(ms)
    sched_job whole -1
    sched_job killed "$mark"
    for w in 0 1; do
        cmp -s "$DIR/whole/out-w$w" "$DIR/killed/out-w$w" ||
            note "worker $w's final values differ from the whole job's ($(cmp "$DIR/whole/out-w$w" "$DIR/killed/out-w$w" 2>&1 | head -n 1))"
    done
    SUMMARY="scheduler killed after round $mark of $ROUNDS and restarted: $(grep -ho 'rejoined in [0-9.]* s' "$DIR/killed/sched2.log" | head -n 1), $(( $(ms) - t0 )) ms for both jobs"
    check_orphans
    finish_case
    teardown
}

# Simulated-device workers (kvs-devworker, dist_sync_device) on hosts of
# several workers: each host's group sums its members' device sums on the
# devices (shared device memory, docs/guide/local-groups.md) and pushes
# once; every output exact, every worker copied from or to another's
# device memory.
case_dev_groups() { # name "L..." S
    local name=$1 layout=$2 S=$3 h i W
    want "$name" || return 0
    new_case "$name"
    layout_net "$layout" || return
    W=$HW
    JOBENV=(DMLC_PS_ROOT_URI="${IP[h0]}" DMLC_NUM_SERVER="$S" DMLC_NUM_WORKER="$W"
            PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=20 PS_VERBOSE=1 KVS_START_TIMEOUT=60
            MXNET_KVSTORE_BIGARRAY_BOUND=1500 KVS_SIM_DEVICES=2)
    SERVERS=$S WORKER_ENV=
    WORKER_CMD=("$BUILD/tests/kvs-devworker" --type dist_sync_device --rounds 3)
    local t0=$(ms)
    host_job_ok "$S" "${LS[@]}"
    local w=0 ipcs=()
    for ((h = 0; h < ${#LS[@]}; h++)); do
        for ((i = 0; i < LS[h]; i++, w++)); do
            grep -q "devworker $w: .*: ok" "$DIR/w$w.log" || note "w$w: not ok"
            grep -q "local rank $i of ${LS[h]}" "$DIR/w$w.log" || note "w$w: not local rank $i of ${LS[h]}"
            local ipc
            ipc=$(sed -nE 's/.*ipc ([0-9]+)\).*/\1/p' "$DIR/w$w.log" | head -n 1)
            ipcs+=("w$w=${ipc:-?}")
            (( LS[h] == 1 )) || [[ ${ipc:-0} -gt 0 ]] || note "w$w: no copy to or from another worker's device memory"
        done
    done
    SUMMARY="hosts of ${LS[*]} workers x $S servers, dist_sync_device on 2 simulated devices each, copies across processes: ${ipcs[*]}, $(( $(ms) - t0 )) ms"
    check_orphans
    finish_case
    teardown
}

echo "# netns: run $RUN, logs in $WORK"
if (( LONG )); then
    case_sums sums_1gbit 1gbit 3 4 1000,300000,4000000 8
    case_sums sums_10gbit 10gbit 3 4 1000,300000,16000000 8
    case_sums loss_1pct 1gbit 2 3 1000,300000,4000000 8 0.01
else
    case_sums sums_1gbit 1gbit 2 2 1000,300000,2000000 3
    case_sums sums_10gbit 10gbit 2 2 1000,300000,2000000 3
    case_sums loss_1pct 1gbit 2 2 1000,300000,1000000 3 0.01
fi
# A link saturated for longer than PS_HEARTBEAT_TIMEOUT behind a 2 s deep
# queue: the heartbeats (own connection, low-delay TOS, a higher pfifo_fast
# band) still pass, so no live node is declared dead.
case_sums saturated_deep_queue 200mbit 2 2 8000000 1 "" 2s
case_cut cut_worker_host worker
case_cut cut_server_host server
case_cut cut_scheduler_host scheduler
case_cut cut_worker_server_pair pair
case_leave
case_mismatch
command -v unshare >/dev/null 2>&1 && {
    case_groups groups_2x3 "3 3" 2
    case_groups groups_mixed_1_3 "1 3" 2
    case_groups groups_off_2x3 "3 3" 2 0
    case_dev_groups groups_devices_2x3 "3 3" 2
    ROUNDS=$(( LONG ? 500 : 150 )) SCALE=$(( LONG ? 91 : 1 ))
    case_replica replica_kill_3hosts
    case_replica replica_kill_optim_3hosts "adam learning_rate=0.01 wd=0.001"
    case_replica replica_cut_3hosts "" cut
    case_sched_restart sched_restart_3hosts
    case_pacing pacing_3hosts
}
echo "netns: $pass passed, $fail failed"
(( fail == 0 ))
