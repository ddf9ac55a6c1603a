#!/usr/bin/env bash
# Tests of deploy/kvs-launch against stand-in binaries (tests/launch/fake-bin).
# Usage: bash tests/launch/test-launch.sh      (from anywhere; loopback only)
# Ends with "launch: N passed, N failed"; exit 0 iff nothing failed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAUNCH=$ROOT/deploy/kvs-launch
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-launch-test.XXXXXX")
MARK=kvsmark$$x$RANDOM          # in the path of every stand-in: pgrep -f finds them
BIN=$WORK/bin-$MARK
cp -R "$ROOT/tests/launch/fake-bin" "$BIN"
# the real kvs-guard (if built): every local process runs through it
BUILDDIR=${BUILD:-build}
[[ $BUILDDIR == /* ]] || BUILDDIR=$ROOT/$BUILDDIR
HAVE_GUARD=0
[[ -x $BUILDDIR/kvs-guard ]] && cp "$BUILDDIR/kvs-guard" "$BIN/" && HAVE_GUARD=1
export KVS_BIN_DIR=$BIN
unset FAKE_DONE_DIR FAKE_PIDS FAKE_SCHED_EXIT FAKE_SERVER_FAIL FAKE_IGNORE_TERM
W=$BIN/fake-worker
trap 'pkill -KILL -f "$MARK" 2>/dev/null; rm -rf "$WORK"' EXIT

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() {
    fail=$((fail + 1)); echo "FAIL - $1"
    echo "  rc=$RC  stdout:"; sed 's/^/    | /' "$WORK/out" | tail -n 15
    echo "  stderr:";        sed 's/^/    | /' "$WORK/err" | tail -n 15
}
check() { # name condition...
    local name=$1; shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}
ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $(( 10#$t / 1000 )); }

# run ARGS...: the launcher with a hard limit; RC, $WORK/out, $WORK/err, ELAPSED (ms)
run() {
    local t0; t0=$(ms)
    timeout -s KILL 25 "$LAUNCH" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
    RC=$?
    ELAPSED=$(( $(ms) - t0 ))
}
out_has() { grep -qF -- "$1" "$WORK/out"; }
err_has() { grep -qF -- "$1" "$WORK/err"; }
# Poll (bounded) until no process carries the marker.
no_orphans() {
    local i
    for ((i = 0; i < 150; i++)); do
        pgrep -f "$MARK" >/dev/null || return 0
        sleep 0.02
    done
    echo "  orphans:"; pgrep -af "$MARK" | sed 's/^/    /'
    return 1
}
# A pid that is gone or a zombie counts as dead.
pid_dead() {
    local st
    kill -0 "$1" 2>/dev/null || return 0
    read -r st <"/proc/$1/stat" 2>/dev/null || return 0
    st=${st##*) }; [[ ${st:0:1} == Z ]]
}

# ------------------------------------------------------------ arguments
run --help
check "--help prints usage, exit 0" eval '[[ $RC == 0 ]] && out_has "Usage: kvs-launch -n W -s S"'

bad_args() { # name expected-message args...
    local name=$1 msg=$2; shift 2
    run "$@"
    check "bad args: $name -> exit 2" eval '[[ $RC == 2 ]] && err_has "$msg"'
}
bad_args "-n 0"            "is not a positive integer" -n 0 -s 1 -- true
bad_args "-n abc"          "is not a positive integer" -n abc -s 1 -- true
bad_args "-s -1"           "is not a positive integer" -n 1 -s -1 -- true
bad_args "missing -s"      "missing -s"                -n 1 -- true
bad_args "missing --"      "missing '--'"              -n 1 -s 1 true
bad_args "no command"      "no worker command"         -n 1 -s 1 --
bad_args "unknown option"  "unknown option"          -n 1 -s 1 --frobnicate -- true
bad_args "--env no '='"    "is not NAME=VALUE"         -n 1 -s 1 --env FOO -- true
bad_args "--env reserved"  "set by the launcher"       -n 1 -s 1 --env DMLC_ROLE=worker -- true
bad_args "bad launcher"    "is not one of"             -n 1 -s 1 --launcher pbs -- true
bad_args "bad timeout"     "not a number of seconds"   -n 1 -s 1 --grace soon -- true
bad_args "ssh w/o port"    "needs a fixed --port"      -n 1 -s 1 --launcher ssh -H /dev/null -- true
bad_args "bad port"        "not a port number"         -n 1 -s 1 --port 70000 -- true
bad_args "--restarts abc"   "is not a number of restarts" -n 1 -s 1 --restarts abc -- true
bad_args "--restarts w/o elastic" "needs elastic workers" -n 1 -s 1 --restarts 1 -- true
bad_args "--restarts over ssh" "is for --launcher local" -n 1 -s 1 --restarts 1 --env KVS_ELASTIC=1 \
    --launcher ssh -H /dev/null --port 9000 -- true
KVS_BIN_DIR=$WORK/nowhere run -n 1 -s 1 -- true
check "missing binaries -> exit 2, says where it looked" eval '[[ $RC == 2 ]] && err_has "cannot find an executable kvs-scheduler"'

# ------------------------------------------------------------ local, success
run -n 2 -s 1 --shutdown-timeout 1 -- sh -c 'echo "hi from $DMLC_WORKER_ID"; echo "oops $DMLC_WORKER_ID" >&2; exit 0'
check "workers exit 0, fake scheduler never exits -> exit 0 with a warning" \
    eval '[[ $RC == 0 ]] && err_has "warning: scheduler, server 0 still running 1 s"'
check "stdout lines prefixed per process" \
    eval 'out_has "[worker 0] hi from 0" && out_has "[worker 1] hi from 1" && out_has "[scheduler] scheduler up on 127.0.0.1:" && out_has "[server 0] server 0 connecting to 127.0.0.1:"'
check "stderr lines prefixed, on stderr" \
    eval 'err_has "[worker 0] oops 0" && err_has "[worker 1] oops 1" && ! out_has "oops"'
check "servers got the scheduler's ephemeral port" \
    eval 'p=$(sed -n "s/^\[scheduler\] scheduler up on 127.0.0.1:\([0-9]*\) .*/\1/p" "$WORK/out"); [[ -n $p ]] && out_has "[server 0] server 0 connecting to 127.0.0.1:$p as 127.0.0.1"'
check "no orphans after success" no_orphans

# While its processes run, the launcher's once-a-second liveness check looks
# at each group's leader, not through /proc (pgrep: ms of CPU that delayed
# the job's own threads): a pgrep in PATH that notes calls made while the
# worker runs is never called in 2.5 s of a job without events.
mkdir -p "$WORK/shim"
cat >"$WORK/shim/pgrep" <<EOF
#!/bin/sh
[ -e "$WORK/running" ] && echo "\$*" >>"$WORK/pgrep.log"
exec $(command -v pgrep) "\$@"
EOF
chmod +x "$WORK/shim/pgrep"
PATH="$WORK/shim:$PATH" run -n 1 -s 1 --shutdown-timeout 1 -- \
    sh -c "touch '$WORK/running'; sleep 2.5; rm -f '$WORK/running'"
check "no /proc scan (pgrep) while the job runs" \
    eval '[[ $RC == 0 && ! -e $WORK/running && ! -s $WORK/pgrep.log ]]'

mkdir "$WORK/done1"
run -n 3 -s 2 --shutdown-timeout 20 --env FAKE_DONE_DIR="$WORK/done1" --env 'MSG=a b'\''c $x' -- \
    sh -c "$W ok && echo \"env FOO=\$FOO MSG=\$MSG role=\$DMLC_ROLE id=\$DMLC_WORKER_ID n=\$DMLC_NUM_WORKER s=\$DMLC_NUM_SERVER host=\$DMLC_NODE_HOST\"" 
check "scheduler+servers that end by themselves -> exit 0 at once, no warning" \
    eval '[[ $RC == 0 ]] && ! err_has "warning" && (( ELAPSED < 10000 ))'
run -n 3 -s 1 --shutdown-timeout 1 --env FOO=bar --env 'MSG=a b'\''c $x' -- \
    sh -c 'echo "env FOO=$FOO MSG=$MSG role=$DMLC_ROLE id=$DMLC_WORKER_ID n=$DMLC_NUM_WORKER s=$DMLC_NUM_SERVER host=$DMLC_NODE_HOST"'
check "--env reaches every worker, values kept verbatim" \
    eval '[[ $RC == 0 ]] && [[ $(grep -cF "env FOO=bar MSG=a b'\''c \$x role=worker" "$WORK/out") == 3 ]]'
check "DMLC_WORKER_ID distinct 0..W-1, DMLC_* set" \
    eval 'for i in 0 1 2; do out_has "[worker $i] env FOO=bar MSG=a b'\''c \$x role=worker id=$i n=3 s=1 host=127.0.0.1" || exit 1; done'

# --restarts: a worker that fails is started again (N times in all).
once='if [ "$DMLC_WORKER_ID" = 1 ] && [ ! -e "$D/again" ]; then touch "$D/again"; echo "first life"; exit 3; fi; echo "life of $DMLC_WORKER_ID"'
mkdir "$WORK/r1"
run -n 2 -s 1 --shutdown-timeout 0.5 --restarts 1 --env KVS_ELASTIC=1 --env D="$WORK/r1" -- sh -c "$once"
check "--restarts 1: a failed worker is started again, the job ends 0" \
    eval '[[ $RC == 0 ]] && err_has "worker 1 failed: exit status 3; restarting it (0 restart(s) left)" && out_has "[worker 1] life of 1" && out_has "[worker 1] first life"'
mkdir "$WORK/r0"
run -n 2 -s 1 --shutdown-timeout 0.5 --env KVS_ELASTIC=1 --env D="$WORK/r0" -- sh -c "$once"
check "--restarts 0 (default): a failed worker fails the job" \
    eval '[[ $RC == 1 ]] && err_has "worker 1 failed: exit status 3" && ! err_has "restarting"'
run -n 2 -s 1 --shutdown-timeout 0.5 --restarts 1 --env KVS_ELASTIC=yes -- sh -c 'exit 4'
check "--restarts 1: the second failure fails the job" \
    eval '[[ $RC == 1 ]] && err_has "restarting it (0 restart(s) left)" && err_has "job failed"'
check "no orphans after restarts" no_orphans

# --restarts with KVS_SCHEDULER_GRACE: a scheduler that fails is started
# again on the port it had (the nodes rejoin it); the workers finish only
# once it runs again.
mkdir "$WORK/sc" "$WORK/scd"
waitsc=': > "$D/started"; while [ ! -e "$D/crashed" ]; do sleep 0.05; done; sleep 0.5; : > "$FAKE_DONE_DIR/$DMLC_WORKER_ID"'
FAKE_SCHED_CRASH_ONCE=$WORK/sc run -n 2 -s 1 --shutdown-timeout 5 --restarts 1 \
    --env KVS_SCHEDULER_GRACE=30 --env D="$WORK/sc" --env FAKE_DONE_DIR="$WORK/scd" -- sh -c "$waitsc"
check "--restarts 1 + KVS_SCHEDULER_GRACE: a crashed scheduler runs again on its port, the job ends 0" \
    eval '[[ $RC == 0 ]] && err_has "scheduler failed: killed by signal 9 (SIGKILL); restarting it on port" &&
          [[ $(sed -n "s/^\[scheduler\] scheduler up on 127.0.0.1:\([0-9]*\) .*/\1/p" "$WORK/out" | sort -u | wc -l) == 1 ]] &&
          [[ $(grep -c "^\[scheduler\] scheduler up on" "$WORK/out") == 2 ]] && out_has "[scheduler] all workers closed; bye"'
bad_args "--restarts w/o grace" "KVS_SCHEDULER_GRACE=SEC" -n 1 -s 1 --restarts 1 --env KVS_SCHEDULER_GRACE=0 -- true
check "no orphans after a scheduler restart" no_orphans

# Lines are never mixed: 3 workers each write 300 lines of 2000 bytes at once.
run -n 3 -s 1 --shutdown-timeout 0.5 -- sh -c 'awk -v id="$DMLC_WORKER_ID" "BEGIN { s = sprintf(\"%2000s\", \"\"); gsub(/ /, id, s); for (i = 0; i < 300; i++) print s }"'
check "long concurrent lines are not interleaved" \
    eval '[[ $RC == 0 ]] && [[ $(grep -cE "^\[worker ([0-2])\] (\1){2000}$" "$WORK/out") == 900 ]]'

# ------------------------------------------------------------ local, failures
run -n 2 -s 1 -- sh -c 'exit 3'
check "worker exits 3 -> non-zero, names the worker and status" \
    eval '[[ $RC == 1 ]] && grep -qE "job failed: worker [01] failed: exit status 3" "$WORK/err"'

run -n 3 -s 2 --grace 5 -- "$W" exit-if 1 7
check "one worker fails while others run forever -> all stopped quickly" \
    eval '[[ $RC == 1 ]] && err_has "job failed: worker 1 failed: exit status 7" && (( ELAPSED < 5000 ))'
check "  ... and no orphans" no_orphans

run -n 1 -s 1 -- sh -c 'kill -KILL $$'
check "worker killed by a signal is reported as such" \
    eval '[[ $RC == 1 ]] && err_has "worker 0 failed: killed by signal 9 (SIGKILL)"'

FAKE_SERVER_FAIL="1 5" run -n 2 -s 2 -- "$W" forever
check "server fails during the job -> non-zero, names it" \
    eval '[[ $RC == 1 ]] && err_has "job failed: server 1 failed: exit status 5" && err_has "[server 1] server 1: failing on purpose"'
check "  ... and no orphans" no_orphans

FAKE_SCHED_EXIT=2 run -n 2 -s 1 -- "$W" ok
check "scheduler exits 2 at start -> reported with its stderr, quick exit" \
    eval '[[ $RC == 1 ]] && err_has "scheduler exited before it was ready (exit status 2): bad configuration" && err_has "    [scheduler] fake scheduler: DMLC_PS_ROOT_PORT: bad value" && (( ELAPSED < 3000 ))'
check "  ... no server or worker was started" eval '! out_has "[server" && ! out_has "[worker"'

FAKE_IGNORE_TERM=1 run -n 2 -s 1 --grace 0.5 -- "$W" exit-if 0 1
check "processes ignoring SIGTERM get SIGKILL after --grace" \
    eval '[[ $RC == 1 ]] && err_has "did not stop within 0.5 s of SIGTERM; sent SIGKILL" && (( ELAPSED < 5000 ))'
check "  ... and no orphans" no_orphans

run -n 1 -s 1 --shutdown-timeout 0.5 -- sh -c "sleep 300 & echo \$! > $WORK/gc.pid; exit 0"
check "a worker's leftover background child is stopped" \
    eval '[[ $RC == 0 ]] && [[ -s $WORK/gc.pid ]] && pid_dead "$(cat "$WORK/gc.pid")"'

run -n 1 -s 1 -- "$WORK/no-such-program"
check "worker command not found -> exit status 127 reported" \
    eval '[[ $RC == 1 ]] && err_has "worker 0 failed: exit status 127"'

# ------------------------------------------------------------ signals
signal_test() { # SIG expected-rc
    local sig=$1 want=$2 pid i rc
    rm -rf "$WORK/pids"; mkdir "$WORK/pids"
    set -m      # own process group: SIGINT is not ignored as for a plain '&' job
    FAKE_PIDS=$WORK/pids "$LAUNCH" -n 2 -s 1 -- "$W" forever >"$WORK/out" 2>"$WORK/err" </dev/null &
    pid=$!
    set +m
    for ((i = 0; i < 250; i++)); do     # until both workers run (<= 5 s)
        [[ $(ls "$WORK/pids" | grep -c '^worker') == 2 ]] && break
        sleep 0.02
    done
    kill -"$sig" "$pid"
    for ((i = 0; i < 500; i++)); do     # until the launcher exits (<= 10 s)
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.02
    done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL -- -"$pid"; fi
    wait "$pid"; RC=$?
    check "SIG$sig to the launcher -> exit $want" eval '[[ $RC == $want ]] && err_has "got SIG$sig; stopping all processes"'
    check "  ... everything stopped, no orphans" no_orphans
}
signal_test INT 130
signal_test TERM 143

# ------------------------------------------------------------ dry runs
printf 'hostA 2\n# a comment\nhostB slots=1   # trailing comment\n\n' >"$WORK/hosts"
run --launcher ssh -H "$WORK/hosts" --port 9000 -n 3 -s 2 --env FOO=bar --dry-run -- python3 train.py --lr 0.1
check "ssh dry run: one ssh line per process" eval '[[ $RC == 0 ]] && [[ $(grep -c "^ssh -o BatchMode=yes " "$WORK/out") == 6 ]]'
check "ssh dry run: scheduler on first host, fixed port" \
    eval 'grep -q "^ssh -o BatchMode=yes hostA .*env .*FOO=bar DMLC_PS_ROOT_URI=hostA DMLC_PS_ROOT_PORT=9000 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=3 DMLC_ROLE=scheduler DMLC_NODE_HOST=hostA $BIN/kvs-scheduler " "$WORK/out"'
check "ssh dry run: servers round-robin" \
    eval 'grep -q "^ssh -o BatchMode=yes hostA .*DMLC_SERVER_ID=0 DMLC_NODE_HOST=hostA " "$WORK/out" && grep -q "^ssh -o BatchMode=yes hostB .*DMLC_SERVER_ID=1 DMLC_NODE_HOST=hostB " "$WORK/out"'
check "ssh dry run: workers over slots, command quoted, cd to cwd" \
    eval 'grep -q "^ssh -o BatchMode=yes hostA .*cd $PWD .*DMLC_WORKER_ID=0 DMLC_NODE_HOST=hostA python3 train.py --lr 0.1 " "$WORK/out" && grep -q "^ssh -o BatchMode=yes hostB .*DMLC_WORKER_ID=1 DMLC_NODE_HOST=hostB python3" "$WORK/out" && grep -q "^ssh -o BatchMode=yes hostA .*DMLC_WORKER_ID=2 DMLC_NODE_HOST=hostA python3" "$WORK/out"'
run --launcher ssh -H "$WORK/hosts" --port 9000 -n 1 -s 1 --env DMLC_INTERFACE=eth1 --dry-run -- true
check "ssh dry run: DMLC_INTERFACE given -> no DMLC_NODE_HOST" eval '[[ $RC == 0 ]] && ! out_has DMLC_NODE_HOST && out_has DMLC_INTERFACE=eth1'
printf 'hostA 0\n' >"$WORK/badhosts"
run --launcher ssh -H "$WORK/badhosts" --port 9000 -n 1 -s 1 --dry-run -- true
check "ssh: bad hostfile line -> exit 2 with file:line" eval '[[ $RC == 2 ]] && err_has "badhosts:1: slots"'

run --launcher mpi -H "$WORK/hosts" --port 9000 -n 2 -s 1 --env FOO=bar --dry-run -- python3 train.py
check "mpi dry run: mpirun line with a role wrapper per rank" \
    eval '[[ $RC == 0 ]] && [[ $(head -n 1 "$WORK/out" | sed "s|--hostfile [^ ]*kvs-launch-hosts[^ ]*|--hostfile HF|") == "mpirun -np 4 --hostfile HF -x KVS_SECRET $LAUNCH --role-from-rank -n 2 -s 1 --port 9000 --scheduler-host hostA --env FOO=bar -- python3 train.py" ]]'
run --launcher slurm --port 9000 -n 2 -s 1 --srun-args "--nodes=2" --dry-run -- python3 train.py
check "slurm dry run: srun line with a role wrapper per rank" \
    eval '[[ $RC == 0 ]] && [[ $(cat "$WORK/out") == "srun --ntasks=4 --kill-on-bad-exit=1 --nodes=2 $LAUNCH --role-from-rank -n 2 -s 1 --port 9000 --rank-var SLURM_PROCID -- python3 train.py" ]]'
run -n 2 -s 1 --dry-run -- ./train
check "local dry run: env + command per process" \
    eval '[[ $RC == 0 ]] && [[ $(wc -l <"$WORK/out") == 4 ]] && grep -q "^env DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=0 .*DMLC_ROLE=scheduler .*$BIN/kvs-scheduler$" "$WORK/out" && grep -q "DMLC_ROLE=worker DMLC_WORKER_ID=1 DMLC_NODE_HOST=127.0.0.1 ./train$" "$WORK/out"'

# --nproc-per-node: W = hosts x L, host-major, torchrun's variables
run --nproc-per-node 3 -s 1 --dry-run -- ./train
check "local --nproc-per-node 3: three workers with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE" \
    eval '[[ $RC == 0 ]] && [[ $(grep -c "DMLC_ROLE=worker" "$WORK/out") == 3 ]] && grep -q "DMLC_NUM_WORKER=3 .*DMLC_WORKER_ID=2 DMLC_NODE_HOST=127.0.0.1 RANK=2 WORLD_SIZE=3 LOCAL_RANK=2 LOCAL_WORLD_SIZE=3 ./train$" "$WORK/out"'
run -n 4 --nproc-per-node 3 -s 1 --dry-run -- ./train
check "local: -n that is not hosts x --nproc-per-node -> exit 2 saying what fits" \
    eval '[[ $RC == 2 ]] && err_has "expected -n 3"'
run --nproc-per-node 0 -s 1 --dry-run -- ./train
check "--nproc-per-node 0 -> exit 2" eval '[[ $RC == 2 ]] && err_has "--nproc-per-node: '"'"'0'"'"' is not a positive integer"'
run --launcher ssh -H "$WORK/hosts" --port 9000 --nproc-per-node 2 -s 2 --dry-run -- python3 train.py
check "ssh --nproc-per-node 2 on 2 hosts: workers 0,1 on hostA and 2,3 on hostB, local ranks 0,1 each" \
    eval '[[ $RC == 0 ]] && [[ $(grep -c "DMLC_ROLE=worker" "$WORK/out") == 4 ]] && grep -q "^ssh -o BatchMode=yes hostA .*DMLC_WORKER_ID=1 DMLC_NODE_HOST=hostA RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 python3" "$WORK/out" && grep -q "^ssh -o BatchMode=yes hostB .*DMLC_WORKER_ID=2 DMLC_NODE_HOST=hostB RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 python3" "$WORK/out"'
run --launcher slurm --port 9000 -n 4 --nproc-per-node 2 -s 1 --dry-run -- python3 train.py
check "slurm --nproc-per-node: passed to every rank's role wrapper" \
    eval '[[ $RC == 0 ]] && out_has "--nproc-per-node 2"'
check "slurm --nproc-per-node 2: two steps, 1+S daemons and W workers 2 per node, both --overlap" \
    eval '[[ $(wc -l <"$WORK/out") == 2 ]] && grep -q "^srun --ntasks=2 --overlap --kill-on-bad-exit=1 .* --role-part daemons " "$WORK/out" && grep -q "^srun --ntasks=4 --ntasks-per-node=2 --nodes=2 --overlap --kill-on-bad-exit=1 .* --role-part workers .*--nproc-per-node 2 -- python3 train.py$" "$WORK/out"'
SLURM_JOB_NUM_NODES=3 run --launcher slurm --port 9000 --nproc-per-node 2 -s 1 --dry-run -- python3 train.py
check "slurm --nproc-per-node 2 without -n in a 3-node allocation: W = 6" \
    eval '[[ $RC == 0 ]] && grep -q "^srun --ntasks=6 --ntasks-per-node=2 --nodes=3 .* -n 6 " "$WORK/out"'
bad_args "slurm --nproc-per-node, -n not a multiple" "-n 3 with --nproc-per-node 2: expected a multiple of 2" \
    --launcher slurm --port 9000 -n 3 --nproc-per-node 2 -s 1 --dry-run -- true
SLURM_JOB_NUM_NODES= bad_args "slurm --nproc-per-node, no -n and no allocation" "give -n W (hosts x L), or run inside an allocation" \
    --launcher slurm --port 9000 --nproc-per-node 2 -s 1 --dry-run -- true
printf 'hostA 2\nhostB slots=3\n' >"$WORK/nhosts"
run --launcher mpi -H "$WORK/nhosts" --port 9000 --nproc-per-node 2 -s 1 --dry-run -- ./train
check "mpi --nproc-per-node 2 on 2 hosts: W = 4, a daemons step and a workers step mapped 2 per node" \
    eval '[[ $RC == 0 ]] && grep -q "^mpirun -np 2 --hostfile .* --role-part daemons " "$WORK/out" && grep -q "^mpirun -np 4 --map-by ppr:2:node --hostfile .* -n 4 -s 1 .*--role-part workers " "$WORK/out"'
KVS_LAUNCH_MPI_PER_NODE='-ppn {L}' run --launcher mpi --scheduler-host h0 --port 9000 -n 6 --nproc-per-node 3 -s 1 --dry-run -- ./train
check "mpi: KVS_LAUNCH_MPI_PER_NODE='-ppn {L}' (MPICH) places the workers" \
    eval '[[ $RC == 0 ]] && grep -q "^mpirun -np 6 -ppn 3 .*--role-part workers " "$WORK/out"'
bad_args "--role-part without --role-from-rank" "--role-part is for --role-from-rank" -n 1 -s 1 --role-part workers -- true
bad_args "--role-part bad" "is not one of all, daemons, workers" -n 1 -s 1 --role-from-rank --port 1 --role-part x -- true
# a worker rank's wrapper: RANK and LOCAL_RANK from the launcher's variables
SLURM_PROCID=3 SLURM_LOCALID=1 run --role-from-rank --role-part workers -n 4 -s 2 --port 9000 --scheduler-host hA --rank-var SLURM_PROCID --nproc-per-node 2 -- \
    sh -c 'echo "id=$DMLC_WORKER_ID role=$DMLC_ROLE RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE"'
check "--role-part workers: rank 3 is worker 3 with torchrun's four variables" \
    eval '[[ $RC == 0 ]] && [[ $(cat "$WORK/out") == "[worker 3] id=3 role=worker RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2" ]]'
mkdir -p "$WORK/ddone" && touch "$WORK/ddone/"{0,1,2,3}   # the fake scheduler ends at once
FAKE_DONE_DIR=$WORK/ddone OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0 run --role-from-rank --role-part daemons -n 4 -s 2 --port 9000 --scheduler-host hA --nproc-per-node 2 -- true
check "--role-part daemons: rank 0 is the scheduler" eval '[[ $RC == 0 ]] && out_has "[scheduler] scheduler up on hA:9000"'
SLURM_PROCID=2 SLURM_LOCALID=2 run --role-from-rank --role-part workers -n 4 -s 1 --port 9000 --scheduler-host hA --rank-var SLURM_PROCID --nproc-per-node 2 -- true
check "--role-part workers: a local rank >= L (too many tasks on a node) -> exit 2, named" \
    eval '[[ $RC == 2 ]] && err_has "SLURM_LOCALID='"'"'2'"'"' is not a local rank below --nproc-per-node 2"'
PMIX_RANK=1 run --role-from-rank --role-part workers -n 4 -s 1 --port 9000 --scheduler-host hA --nproc-per-node 2 -- true
check "--role-part workers: no local rank variable -> exit 2, says which were looked at" \
    eval '[[ $RC == 2 ]] && err_has "no local rank variable set (OMPI_COMM_WORLD_LOCAL_RANK MPI_LOCALRANKID SLURM_LOCALID)"'
SLURM_PROCID=4 run --role-from-rank --role-part workers -n 4 -s 1 --port 9000 --scheduler-host hA --nproc-per-node 2 -- true
check "--role-part workers: rank >= W -> exit 2" eval '[[ $RC == 2 ]] && err_has "the job has only 4 workers (-n 4)"'
# deploy/slurm/kvsd.sbatch as sbatch runs it in a 2-node allocation (dry run)
printf '#!/bin/sh\nexec "%s" --dry-run "$@"\n' "$LAUNCH" >"$WORK/launch-dry" && chmod +x "$WORK/launch-dry"
SLURM_JOB_NUM_NODES=2 KVS_LAUNCH=$WORK/launch-dry timeout 20 bash "$ROOT/deploy/slurm/kvsd.sbatch" >"$WORK/out" 2>"$WORK/err"; RC=$?
check "kvsd.sbatch in 2 nodes: workers step of 8 tasks 4 per node, daemons step of 3" \
    eval '[[ $RC == 0 ]] && grep -q "^srun --ntasks=3 --overlap --kill-on-bad-exit=1 --label .* -n 8 -s 2 --port 9091 --role-part daemons" "$WORK/out" && grep -q "^srun --ntasks=8 --ntasks-per-node=4 --nodes=2 --overlap --kill-on-bad-exit=1 --label .*--role-part workers .* -- python3 train.py$" "$WORK/out"'
# slurm end to end (stand-in srun): every worker gets torchrun's variables
mkdir -p "$WORK/sdone"
KVS_LAUNCH_SRUN=$BIN/fake-srun FAKE_SRUN_LOG=$WORK/srun.log FAKE_DONE_DIR=$WORK/sdone \
    run --launcher slurm --scheduler-host 127.0.0.1 --port 9000 -n 4 --nproc-per-node 2 -s 1 --shutdown-timeout 10 -- \
    sh -c 'echo "torch RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE"; exec "$0" ok' "$W"
check "slurm --nproc-per-node 2 run: exit 0, two steps (2 tasks; 4 tasks 2 per node)" \
    eval '[[ $RC == 0 ]] && [[ $(sort "$WORK/srun.log" | tr "\n" " ") == "2 2 4 2 " ]] && ! err_has warning'
check "slurm --nproc-per-node 2 run: worker i has RANK=i, LOCAL_RANK=i%2, WORLD_SIZE=4, LOCAL_WORLD_SIZE=2" \
    eval 'for i in 0 1 2 3; do out_has "[worker $i] torch RANK=$i WORLD_SIZE=4 LOCAL_RANK=$((i % 2)) LOCAL_WORLD_SIZE=2" || exit 1; done; out_has "[server 0] server 0 connecting to 127.0.0.1:9000"'
KVS_LAUNCH_SRUN=$BIN/fake-srun run --launcher slurm --scheduler-host 127.0.0.1 --port 9000 -n 4 --nproc-per-node 2 -s 1 --grace 1 -- "$W" exit-if 2 5
check "slurm --nproc-per-node: a failed worker fails the job and stops the daemons' step quickly" \
    eval '[[ $RC == 1 ]] && err_has "job failed: the workers'"'"' step exited with exit status 1" && (( ELAPSED < 10000 ))'
check "  ... and no orphans" no_orphans

# ------------------------------------------------------------ job secrets
secret_paths() { sed -n 's/.* secret [0-9a-f]* at //p' "$WORK/out"; }
one_secret() { [[ $(sed -n 's/.* secret \([0-9a-f]*\) at .*/\1/p' "$WORK/out" | sort -u | wc -l) == 1 ]]; }
mkdir "$WORK/ds1" "$WORK/ds2" "$WORK/ds3"
run -n 2 -s 1 --env FAKE_DONE_DIR="$WORK/ds1" -- "$W" secret
check "local: every worker gets the same job secret in a 0600 file" \
    eval '[[ $RC == 0 ]] && [[ $(secret_paths | wc -l) == 2 ]] && one_secret'
check "local: the secret file is gone after the job" \
    eval 'for f in $(secret_paths); do [[ ! -e $f ]] || exit 1; done'
first=$(sed -n 's/.* secret \([0-9a-f]*\) at .*/\1/p' "$WORK/out" | head -n 1)
run -n 1 -s 1 --env FAKE_DONE_DIR="$WORK/ds2" -- "$W" secret
check "local: a new secret per job" \
    eval '[[ $RC == 0 ]] && ! grep -q " secret $first " "$WORK/out"'
run --insecure -n 1 -s 1 --env FAKE_DONE_DIR="$WORK/ds3" -- sh -c 'test -z "${KVS_SECRET_FILE:-}${KVS_SECRET:-}" && : > "$0/x"' "$WORK/ds3"
check "--insecure: no secret" eval '[[ $RC == 0 ]]'
printf 'the users own secret, long enough\n' >"$WORK/mysecret"; chmod 600 "$WORK/mysecret"
mkdir "$WORK/ds4"
run -n 1 -s 1 --env FAKE_DONE_DIR="$WORK/ds4" --env KVS_SECRET_FILE="$WORK/mysecret" -- sh -c 'test "$KVS_SECRET_FILE" = "$0" && : > "$1/x"' "$WORK/mysecret" "$WORK/ds4"
check "a given KVS_SECRET_FILE is used, none made" eval '[[ $RC == 0 ]]'
run --launcher ssh -H "$WORK/hosts" --port 9000 -n 1 -s 1 --env KVS_SECRET=abcdefghijklmnopq --dry-run -- true
check "ssh: --env KVS_SECRET (a command line) -> exit 2" eval '[[ $RC == 2 ]] && err_has "command lines"'
run --launcher ssh -H "$WORK/hosts" --port 9000 -n 1 -s 1 --dry-run -- true
check "ssh dry run: the secret is read from stdin, never on the command line" \
    eval '[[ $RC == 0 ]] && out_has "IFS= read -r k" && ! grep -qE "[A-Za-z0-9+/]{40}=" "$WORK/out"'
run --launcher slurm --port 9000 -n 1 -s 1 --dry-run -- true
check "slurm dry run: no secret on the srun line" eval '[[ $RC == 0 ]] && ! out_has KVS_SECRET'
# a launcher command that is not installed: one clear line, exit 127
KVS_LAUNCH_SRUN=$WORK/no-such-srun run --launcher slurm --port 9000 -n 1 -s 1 -- true
check "slurm: srun missing -> a line naming it, exit 127" \
    eval '[[ $RC == 127 ]] && err_has "--launcher slurm: '"'"'$WORK/no-such-srun'"'"' not found" && ! err_has "command not found"'
KVS_LAUNCH_MPIRUN=$WORK/no-such-mpirun run --launcher mpi --scheduler-host 127.0.0.1 --port 9000 -n 1 -s 1 -- true
check "mpi: mpirun missing -> a line naming it, exit 127" \
    eval '[[ $RC == 127 ]] && err_has "--launcher mpi: '"'"'$WORK/no-such-mpirun'"'"' not found" && ! err_has "command not found"'

# ------------------------------------------------------------ role wrapper (mpi/slurm ranks)
role() { run --role-from-rank -n 3 -s 1 --port 9000 --scheduler-host hostA --env FOO=bar -- sh -c 'echo "$DMLC_ROLE $DMLC_WORKER_ID $DMLC_PS_ROOT_URI $DMLC_PS_ROOT_PORT $FOO"'; }
OMPI_COMM_WORLD_RANK=3 role
check "role wrapper: rank 3 of 1+1+3 -> worker 1 (output prefixed)" eval '[[ $RC == 0 ]] && [[ $(cat "$WORK/out") == "[worker 1] worker 1 hostA 9000 bar" ]]'
FAKE_SERVER_FAIL="0 7" PMI_RANK=1 role
check "role wrapper: rank 1 -> kvs-server with DMLC_SERVER_ID=0" eval '[[ $RC == 7 ]] && out_has "[server 0] server 0 connecting to hostA:9000"'
FAKE_SCHED_EXIT=4 SLURM_PROCID=0 role
check "role wrapper: rank 0 -> kvs-scheduler" eval '[[ $RC == 4 ]] && err_has "fake scheduler:"'
SLURM_PROCID=5 role
check "role wrapper: rank past the job -> exit 2" eval '[[ $RC == 2 ]] && err_has "rank 5 but the job has only 5 processes"'
env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u SLURM_PROCID "$LAUNCH" --role-from-rank -n 1 -s 1 --port 9000 --scheduler-host h -- true >"$WORK/out" 2>"$WORK/err"; RC=$?
check "role wrapper: no rank variable -> exit 2" eval '[[ $RC == 2 ]] && err_has "no rank variable"'

# ------------------------------------------------------------ ssh, end to end on this machine
printf '127.0.0.1 2\nlocalhost\n' >"$WORK/lhosts"
export KVS_LAUNCH_SSH=$BIN/fake-ssh
mkdir "$WORK/done2"
run --launcher ssh -H "$WORK/lhosts" --port 9000 -n 3 -s 2 --env FAKE_DONE_DIR="$WORK/done2" -- "$W" ok
check "ssh (stand-in ssh): job runs and exits 0" \
    eval '[[ $RC == 0 ]] && out_has "[worker 1] worker 1 of 3, servers 2, root 127.0.0.1:9000, host localhost" && out_has "[server 1] server 1 connecting to 127.0.0.1:9000 as localhost"'
mkdir "$WORK/ds5"
run --launcher ssh -H "$WORK/lhosts" --port 9000 -n 3 -s 2 --env FAKE_DONE_DIR="$WORK/ds5" -- "$W" secret
check "ssh (stand-in ssh): every worker gets the same secret through stdin, in a 0600 file" \
    eval '[[ $RC == 0 ]] && [[ $(secret_paths | wc -l) == 3 ]] && one_secret'
check "ssh: the remote secret files are gone after the job" \
    eval 'for f in $(secret_paths); do [[ ! -e $f ]] || exit 1; done'
run --launcher ssh -H "$WORK/lhosts" --port 9000 -n 3 -s 2 -- "$W" exit-if 2 4
check "ssh: a failing worker stops the remote processes (EOF watchdog)" \
    eval '[[ $RC == 1 ]] && err_has "job failed: worker 2 on 127.0.0.1 failed: exit status 4"'
check "  ... and no orphans" no_orphans
unset KVS_LAUNCH_SSH

# ------------------------------------------------------------ launch.py habits
run --version
check "--version prints the version from include/kvs.h" eval '[[ $RC == 0 ]] && grep -qx "kvs-launch (kvsd) [0-9]*\.[0-9]*\.[0-9]*" "$WORK/out" && [[ $(cut -d" " -f3 "$WORK/out") == $(awk "/define KVS_VERSION_MAJOR/{a=\$3}/define KVS_VERSION_MINOR/{b=\$3}/define KVS_VERSION_PATCH/{c=\$3}END{print a\".\"b\".\"c}" "$ROOT/include/kvs.h") ]]'
run -n 2 -s 1 --env OMP_NUM_THREADS:3 --env 'A=x:y' --env-server SRV_ONLY:1 --env-worker WRK=yes --dry-run -- ./train
check "--env K:V (launch.py form) becomes K=V in every process; K=a:b stays" \
    eval '[[ $RC == 0 ]] && [[ $(grep -c "OMP_NUM_THREADS=3 A=x:y " "$WORK/out") == 4 ]]'
check "--env-server reaches only the servers, --env-worker only the workers" \
    eval '[[ $(grep -c SRV_ONLY=1 "$WORK/out") == 1 ]] && grep -q "DMLC_ROLE=server .*SRV_ONLY=1 .*kvs-server$" "$WORK/out" && [[ $(grep -c WRK=yes "$WORK/out") == 2 ]] && ! grep -q "DMLC_ROLE=scheduler.*WRK=yes" "$WORK/out"'
bad_args "--env-worker bad"  "is not NAME=VALUE (or NAME:VALUE)" -n 1 -s 1 --env-worker 9X=1 -- true
bad_args "--env-server reserved" "set by the launcher" -n 1 -s 1 --env-server DMLC_ROLE:x -- true
bad_args "--sync-dst-dir local" "is for --launcher ssh" -n 1 -s 1 --sync-dst-dir /x -- true
bad_args "--metrics-port bad" "is not a port number" -n 1 -s 1 --metrics-port 65535 -- true
run -n 2 -s 2 --metrics-port 9100 --dry-run -- ./train
check "--metrics-port P: scheduler P, server i P+1+i, workers none" \
    eval 'grep -q "DMLC_ROLE=scheduler .*KVS_METRICS_PORT=9100 " "$WORK/out" && grep -q "DMLC_SERVER_ID=0 .*KVS_METRICS_PORT=9101 " "$WORK/out" && grep -q "DMLC_SERVER_ID=1 .*KVS_METRICS_PORT=9102 " "$WORK/out" && ! grep -q "DMLC_ROLE=worker.*KVS_METRICS_PORT" "$WORK/out"'

# ssh: search paths travel along; --sync-dst-dir copies once per host first
PATH=$PATH:/opt/kvs-test/bin LD_LIBRARY_PATH=/opt/kvs-test/lib PYTHONPATH=/opt/kvs-test/py \
    run --launcher ssh -H "$WORK/hosts" --port 9000 -n 3 -s 2 --sync-dst-dir /srv/job --dry-run -- python3 train.py
check "ssh dry run: PATH, LD_LIBRARY_PATH, PYTHONPATH forwarded to every process" \
    eval '[[ $RC == 0 ]] && [[ $(grep -c "PATH=[^ ]*:/opt/kvs-test/bin LD_LIBRARY_PATH=/opt/kvs-test/lib PYTHONPATH=/opt/kvs-test/py " "$WORK/out") == 6 ]]'
check "ssh dry run: --sync-dst-dir: one rsync per host, then cd there" \
    eval '[[ $(grep -c "^rsync -a -e .* ./ host[AB]:/srv/job/$" "$WORK/out") == 2 ]] && [[ $(head -n 2 "$WORK/out" | grep -c ^rsync) == 2 ]] && [[ $(grep -c "cd /srv/job " "$WORK/out") == 6 ]]'
run --launcher ssh -H "$WORK/hosts" --port 9000 -n 1 -s 1 --env PATH=/only --dry-run -- true
check "ssh: --env PATH=... wins over the forwarded PATH" eval '[[ $RC == 0 ]] && ! grep -q "PATH=[^ ]*/usr" "$WORK/out" && [[ $(grep -c " PATH=/only " "$WORK/out") == 3 ]]'

# ssh end to end with --sync-dst-dir (stand-in rsync copies locally) and --log-dir
mkdir -p "$WORK/src/sub" && echo payload >"$WORK/src/sub/data.txt"
cat >"$BIN/fake-rsync" <<'EOF'
#!/bin/sh
# Stand-in for rsync (tests/launch): fake-rsync -a -e SSH SRC/ HOST:DIR/ copies SRC into DIR.
[ -n "${FAKE_RSYNC_LOG:-}" ] && echo "$*" >>"$FAKE_RSYNC_LOG"
while [ $# -gt 2 ]; do shift; done
mkdir -p "${2#*:}" && cp -R "$1". "${2#*:}"
EOF
chmod +x "$BIN/fake-rsync"
export KVS_LAUNCH_SSH=$BIN/fake-ssh KVS_LAUNCH_RSYNC=$BIN/fake-rsync FAKE_RSYNC_LOG=$WORK/rsync.log
printf '127.0.0.1\nlocalhost\n' >"$WORK/lhosts2"
(cd "$WORK/src" && timeout -s KILL 25 "$LAUNCH" --launcher ssh -H "$WORK/lhosts2" --port 9000 -n 2 -s 1 \
    --sync-dst-dir "$WORK/dst" --log-dir "$WORK/logs" --shutdown-timeout 1 -- \
    sh -c 'echo "worker $DMLC_WORKER_ID in $PWD reads $(cat sub/data.txt)"; echo "worker $DMLC_WORKER_ID err" >&2' \
    >"$WORK/out" 2>"$WORK/err" </dev/null); RC=$?
check "ssh + --sync-dst-dir: copied once per host, workers run in the copy" \
    eval '[[ $RC == 0 ]] && [[ $(wc -l <"$WORK/rsync.log") == 2 ]] && out_has "[worker 0] worker 0 in $WORK/dst reads payload" && out_has "[worker 1] worker 1 in $WORK/dst reads payload"'
check "--log-dir: one file per process, unprefixed, stdout and stderr" \
    eval 'for f in scheduler server-0 worker-0 worker-1; do [[ -f $WORK/logs/$f.log ]] || exit 1; done; grep -qx "worker 1 in $WORK/dst reads payload" "$WORK/logs/worker-1.log" && grep -qx "worker 1 err" "$WORK/logs/worker-1.log" && ! grep -q "worker 0" "$WORK/logs/worker-1.log" && grep -q "^server 0 connecting to" "$WORK/logs/server-0.log"'
check "--log-dir: the console keeps its prefixes" eval 'err_has "[worker 1] worker 1 err"'
unset KVS_LAUNCH_SSH KVS_LAUNCH_RSYNC FAKE_RSYNC_LOG

# mpi: Open MPI hostfile form; per-rank prefixes and log files in the role wrapper
printf 'hostA 2\nhostB slots=3\nhostC\n' >"$WORK/mhosts"
run --launcher mpi -H "$WORK/mhosts" --port 9000 -n 2 -s 1 --dry-run -- ./train
check "mpi dry run: 'host N' becomes Open MPI's 'host slots=N'" \
    eval '[[ $RC == 0 ]] && grep -qx "# hostfile: hostA slots=2" "$WORK/out" && grep -qx "# hostfile: hostB slots=3" "$WORK/out" && grep -qx "# hostfile: hostC" "$WORK/out" && grep -q "^mpirun -np 4 --hostfile /[^ ]*kvs-launch-hosts" "$WORK/out"'
printf 'hostA two\n' >"$WORK/mbad"
run --launcher mpi -H "$WORK/mbad" --port 9000 -n 1 -s 1 --dry-run -- ./train
check "mpi: a bad hostfile line -> exit 2" eval '[[ $RC == 2 ]] && err_has "expected '"'"'host'"'"', '"'"'host N'"'"' or '"'"'host slots=N'"'"'"'
cat >"$BIN/fake-mpirun" <<'EOF'
#!/bin/bash
# Stand-in for mpirun (tests/launch): -np N --hostfile F CMD... runs N ranks here.
# --map-by ppr:L:node: L ranks per "node" (OMPI_COMM_WORLD_LOCAL_RANK = r mod L).
[[ $1 == -np ]] || exit 9; n=$2; shift 2
per=$n
[[ $1 == --map-by ]] && { per=${2#ppr:}; per=${per%%:*}; shift 2; }
[[ $1 == --hostfile ]] && { cp "$2" "$FAKE_MPI_HOSTS"; shift 2; }
while [[ $1 == -x ]]; do shift 2; done   # exported variables: inherited here anyway
pids=()
for ((r = 0; r < n; r++)); do OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_LOCAL_RANK=$((r % per)) "$@" & pids+=($!); done
st=0; for p in "${pids[@]}"; do wait "$p" || st=1; done; exit $st
EOF
chmod +x "$BIN/fake-mpirun"
mkdir -p "$WORK/mdone" "$WORK/mtmp"
TMPDIR=$WORK/mtmp KVS_LAUNCH_MPIRUN=$BIN/fake-mpirun FAKE_MPI_HOSTS=$WORK/mpihosts.used FAKE_DONE_DIR=$WORK/mdone \
    run --launcher mpi -H "$WORK/mhosts" --scheduler-host 127.0.0.1 --port 9000 -n 2 -s 1 --env-worker WHO=w \
    --log-dir "$WORK/mlogs" -- sh -c '$0 ok; echo "env WHO=$WHO"' "$W"
check "mpi run: every rank's output prefixed with its role" \
    eval 'out_has "[worker 1] worker 1 of 2" && out_has "[worker 0] env WHO=w" && out_has "[server 0] server 0 connecting to 127.0.0.1:9000" && err_has "[worker 1] worker 1 to stderr"'
check "mpi run: the generated hostfile was used and removed" \
    eval 'grep -qx "hostA slots=2" "$WORK/mpihosts.used" && [[ -z $(ls -A "$WORK/mtmp") ]]'
check "mpi run: --log-dir files per rank" eval 'grep -qx "env WHO=w" "$WORK/mlogs/worker-0.log" && grep -q "^server 0 connecting" "$WORK/mlogs/server-0.log"'
mkdir -p "$WORK/mdone2"
TMPDIR=$WORK/mtmp KVS_LAUNCH_MPIRUN=$BIN/fake-mpirun FAKE_MPI_HOSTS=$WORK/mpihosts2.used FAKE_DONE_DIR=$WORK/mdone2 \
    run --launcher mpi -H "$WORK/nhosts" --scheduler-host 127.0.0.1 --port 9000 --nproc-per-node 3 -s 1 --shutdown-timeout 10 -- \
    sh -c 'echo "torch RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE"; exec "$0" ok' "$W"
check "mpi --nproc-per-node 3 on 2 hosts run: exit 0; worker i has RANK=i, LOCAL_RANK=i%3 of 3, WORLD_SIZE=6" \
    eval '[[ $RC == 0 ]] && for i in 0 1 2 3 4 5; do out_has "[worker $i] torch RANK=$i WORLD_SIZE=6 LOCAL_RANK=$((i % 3)) LOCAL_WORLD_SIZE=3" || exit 1; done && [[ -z $(ls -A "$WORK/mtmp") ]]'
SLURM_PROCID=2 run --role-from-rank -n 2 -s 1 --port 9000 --scheduler-host hostA -- sh -c 'echo out; echo err >&2; exit 3'
check "slurm rank: prefixed both streams, exit status kept" \
    eval '[[ $RC == 3 ]] && [[ $(cat "$WORK/out") == "[worker 0] out" ]] && err_has "[worker 0] err"'
# ------------------------------------------------------------ launcher SIGKILLed
# kvs-guard: nothing the launcher started outlives it, even a process that
# ignores SIGTERM (SIGKILL 3 s later).
count_marked() { pgrep -f "$MARK" 2>/dev/null | wc -l; }
launcher_killed() { # name extra-env...
    local name=$1 i t0 LP
    shift
    env "$@" "$LAUNCH" -n 2 -s 1 -- "$W" forever >"$WORK/out" 2>"$WORK/err" </dev/null &
    LP=$!
    for ((i = 0; i < 500; i++)); do   # scheduler, server, 2 workers: 4 guarded processes
        (( $(pgrep -f "$MARK/kvs-guard" 2>/dev/null | wc -l) >= 8 )) && break
        sleep 0.02
    done
    t0=$(ms)
    kill -KILL "$LP"; wait "$LP" 2>/dev/null
    for ((i = 0; i < 400; i++)); do
        pgrep -f "$MARK" >/dev/null || break
        sleep 0.02
    done
    ELAPSED=$(( $(ms) - t0 ))
    RC=137
    check "$name (gone ${ELAPSED} ms after the kill)" eval '! pgrep -f "$MARK" >/dev/null || { pgrep -af "$MARK" | sed "s/^/    /"; false; }'
    pkill -KILL -f "$MARK" 2>/dev/null
}
if (( HAVE_GUARD )); then
    launcher_killed "launcher SIGKILLed: every process it started dies"
    launcher_killed "launcher SIGKILLed: processes that ignore SIGTERM die too" FAKE_IGNORE_TERM=1
else
    echo "skip - launcher SIGKILLed: kvs-guard is not built (make)"
fi

# ------------------------------------------------------------ one prefix per line
run -n 1 -s 1 --shutdown-timeout 0.5 -- sh -c 'echo "2026-12-03T06:35:56.123Z [worker 0] h[1] WARN net: own tag"; echo plain'
check "a kvsd log line keeps its own tag; other lines get the launcher's" \
    eval '[[ $RC == 0 ]] && grep -qx "2026-12-03T06:35:56.123Z \[worker 0\] h\[1\] WARN net: own tag" "$WORK/out" && out_has "[worker 0] plain"'

# The real binaries (when built): every daemon and library line carries one
# tag, its time, host and pid; the worker's own output one prefix.
REAL=$ROOT/${BUILD:-build}
if [[ -x $REAL/kvs-scheduler && -x $REAL/kvs-bench ]]; then
    KVS_BIN_DIR=$REAL run -n 2 -s 1 --env PS_VERBOSE=1 -- "$REAL/kvs-bench" --sizes 4K --iters 3 --warmup 1
    re='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z \[(scheduler|server 0|worker [01])\] [^ ]+\[[0-9]+\] (ERROR|WARN|INFO|DEBUG) [a-z]+: '
    check "real job: exit 0, daemons and library log with time, node, host[pid], level" \
        eval '[[ $RC == 0 ]] && grep -qE "$re" "$WORK/err" && grep -qE "^[^[]*\[server 0\] [^ ]+ INFO job: registered as rank 0" "$WORK/err" && grep -qE "^[^[]*\[worker 1\] [^ ]+ INFO job: registered" "$WORK/err"'
    check "real job: no line carries two prefixes" \
        eval '! grep -E "\] \[(scheduler|server|worker)" "$WORK/out" "$WORK/err" && ! grep -E "^\[(scheduler|server [0-9]+|worker [0-9]+)\] [0-9]{4}-" "$WORK/out" "$WORK/err"'
    check "real job: every stderr line is a log line or prefixed" \
        eval '! grep -vE "$re|^\[(scheduler|server [0-9]+|worker [0-9]+)\] |^kvs-launch: " "$WORK/err"'
    check "real job: worker output prefixed once" eval 'out_has "[worker 0] kvs-bench: 2 worker(s), 1 server(s)"'
    # --interleave: one round of each op in turn; each op's own output is checked
    KVS_BIN_DIR=$REAL run -n 2 -s 2 -- "$REAL/kvs-bench" --sizes 4K,1M --iters 4 --warmup 1 --interleave
    check "kvs-bench --interleave: exit 0, push, pull, pushpull rows per size, every value ok" \
        eval '[[ $RC == 0 ]] && [[ $(grep -cE "^\[worker 0\] (4K|1M) +float32 +(push|pull|pushpull) +4 .* ok$" "$WORK/out") == 6 ]] && grep -E "^\[worker 0\] (4K|1M) " "$WORK/out" | awk "{print \$5}" | tr "\n" " " | grep -qx "push pull pushpull push pull pushpull "'
    # dist_async: every push adds; the totals after each op are checked exactly
    # (every dtype, each op alone and interleaved), and rank 1's rows too
    KVS_BIN_DIR=$REAL run -n 2 -s 2 -- "$REAL/kvs-bench" --type dist_async --sizes 4K,1M \
        --dtypes float32,float64,float16,bfloat16,int32,int64 --iters 5 --warmup 1
    check "kvs-bench --type dist_async: exit 0, every row of 6 dtypes x 2 sizes x 3 ops ok" \
        eval '[[ $RC == 0 ]] && [[ $(grep -cE "^\[worker 0\] (4K|1M) +[a-z0-9]+ +(push|pull|pushpull) .* ok$" "$WORK/out") == 36 ]] && ! grep -q WRONG "$WORK/out" && ! grep -q "wrong value" "$WORK/err"'
    KVS_BIN_DIR=$REAL run -n 3 -s 1 -- "$REAL/kvs-bench" --type dist_async --sizes 64K --iters 4 --warmup 0 --interleave
    check "kvs-bench --type dist_async --interleave, 3 workers (odd push counts): exit 0, rows ok" \
        eval '[[ $RC == 0 ]] && [[ $(grep -cE "^\[worker 0\] 64K +float32 +(push|pull|pushpull) +4 .* ok$" "$WORK/out") == 3 ]]'
fi

# Under torchrun (docs/guide/local-groups.md): the scheduler and a server
# started by hand beside it, torchrun starts 3 workers; torchrun's LOCAL_RANK
# and LOCAL_WORLD_SIZE make them one local group; every value checked.
if [[ -x $REAL/kvs-scheduler && -x $REAL/kvs-bench ]] && command -v torchrun >/dev/null 2>&1; then
    # (--redirects/--tee 9:1: no redirection of ranks 0..2, written so that
    # the torchrun of Debian's PyTorch 1.13 under Python 3.11 parses it)
    T=$WORK/torchrun; mkdir -p "$T"
    ( umask 077; head -c 32 /dev/urandom | base64 >"$T/secret" )
    (
        export KVS_SECRET_FILE=$T/secret DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NODE_HOST=127.0.0.1
        export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=3 PS_VERBOSE=1
        DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=0 KVS_PORT_FILE=$T/port "$REAL/kvs-scheduler" >"$T/sched.log" 2>&1 &
        sp=$!
        for ((i = 0; i < 1500; i++)); do [[ -s $T/port ]] && break; sleep 0.02; done   # bounded: 30 s
        export DMLC_PS_ROOT_PORT=$(cat "$T/port")
        DMLC_ROLE=server "$REAL/kvs-server" >"$T/server.log" 2>&1 &
        vp=$!
        DMLC_ROLE=worker timeout -s KILL 150 torchrun --standalone --nproc_per_node 3 --no_python \
            --redirects 9:1 --tee 9:1 \
            sh -c 'DMLC_WORKER_ID=$RANK exec "$0" --sizes 4K,1M --iters 3 --warmup 1' "$REAL/kvs-bench" \
            >"$WORK/out" 2>"$WORK/err"
        rc=$?
        echo $rc >"$T/rc"
        (( rc == 0 )) || kill -KILL $sp $vp 2>/dev/null   # else they end with the job
        wait
    )
    RC=$(cat "$T/rc")
    check "torchrun --nproc-per-node 3 beside a hand-started scheduler and server: exit 0, every value ok" \
        eval '[[ $RC == 0 ]] && grep -qE "(4K|1M) +float32 +pushpull .* ok$" "$WORK/out" && ! grep -q WRONG "$WORK/out"'
    check "  ... torchrun's LOCAL_RANK/LOCAL_WORLD_SIZE made one local group of 3" \
        eval 'for r in 0 1 2; do grep -q "local rank $r of 3: summing locally" "$WORK/err" || exit 1; done'
else
    echo "skip - torchrun: not installed, or the real binaries are not built"
fi

# --restarts with the real binaries: a worker of an elastic job dies in its
# first life and joins the running job again (kvs-elasticworker).
if [[ -x $REAL/kvs-scheduler && -x $REAL/tests/kvs-elasticworker ]]; then
    mkdir -p "$WORK/rreal"
    EW=$REAL/tests/kvs-elasticworker
    KVS_BIN_DIR=$REAL run -n 3 -s 1 --restarts 1 --env KVS_ELASTIC=1 --env KVS_MIN_WORKERS=2 \
        --env MXNET_KVSTORE_BIGARRAY_BOUND=1000 --env KVS_TEST_DIR="$WORK/rreal" -- \
        sh -c 'if [ "$DMLC_WORKER_ID" = 2 ]; then if [ -e "$KVS_TEST_DIR/died" ]; then exec "$0" w2b 200 3 --joiner; fi; touch "$KVS_TEST_DIR/died"; exec "$0" w2 200 3 --die-at 20; fi; exec "$0" "w$DMLC_WORKER_ID" 200 3' "$EW"
    check "--restarts 1 with real binaries: the worker killed at step 20 joins again, exit 0" \
        eval '[[ $RC == 0 ]] && err_has "worker 2 failed: killed by signal 9 (SIGKILL)" && out_has "joiner pulled the current values" && [[ $(grep -c "memberships .* workers 3 steps" "$WORK/out") == 3 ]]'
else
    echo "skip - --restarts with real binaries: not built"
fi

echo "launch: $pass passed, $fail failed"
[[ $fail == 0 ]]
