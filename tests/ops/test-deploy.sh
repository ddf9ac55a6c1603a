#!/usr/bin/env bash
# deploy/k8s and deploy/docker: the manifests parse, the job size is set in
# one place (render.sh) and agrees everywhere, the scheduler and servers are
# Jobs that end with the job and never restart, the shipped kvsd-job.yaml is
# what render.sh writes, and the image the manifests use is the Dockerfile's.
# Usage: bash tests/ops/test-deploy.sh    Ends "deploy: N passed, N failed".
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K=$ROOT/deploy/k8s
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-deploy-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

"$K/render.sh" >"$WORK/default.yaml"
check "deploy/k8s/kvsd-job.yaml is render.sh's output (no drift)" cmp -s "$WORK/default.yaml" "$K/kvsd-job.yaml"
"$K/render.sh" -s 3 -w 6 -l 2 -i reg.example/kvsd:9 -c 'python3 train.py --epochs 2' >"$WORK/job.yaml"
check "render.sh -s 3 -w 6 -l 2 -i IMAGE -c CMD: exit 0" test $? = 0
/usr/bin/python3 - "$WORK/job.yaml" 3 6 2 reg.example/kvsd:9 "$WORK/worker.sh" >"$WORK/check.out" 2>&1 <<'EOF'
import sys, yaml
path, S, W, L, image, script = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
docs = list(yaml.safe_load_all(open(path)))
kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
assert kinds == [("Job", "kvsd-scheduler"), ("Job", "kvsd-server"), ("Job", "kvsd-worker"),
                 ("Service", "kvsd-scheduler")], kinds
jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
size = {"kvsd-scheduler": 1, "kvsd-server": S, "kvsd-worker": W // L}
for name, j in jobs.items():
    spec, pod = j["spec"], j["spec"]["template"]["spec"]
    assert spec["backoffLimit"] == 0, name
    assert pod["restartPolicy"] == "Never", name
    assert spec["completions"] == size[name], (name, spec["completions"])
    assert spec.get("parallelism", 1) == size[name], name
    for c in pod["containers"]:
        assert c["image"] == image, c["image"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["DMLC_NUM_SERVER"] == str(S) and env["DMLC_NUM_WORKER"] == str(W), env
        assert env["DMLC_PS_ROOT_URI"] == "kvsd-scheduler" and env["DMLC_PS_ROOT_PORT"] == "9091"
        # the job secret, as a 0400 file from the Secret kvsd-secret
        assert env["KVS_SECRET_FILE"] == "/etc/kvsd-secret/secret", env
        assert c["volumeMounts"] == [{"name": "kvsd-secret", "mountPath": "/etc/kvsd-secret", "readOnly": True}]
    assert pod["volumes"] == [{"name": "kvsd-secret", "secret": {"secretName": "kvsd-secret", "defaultMode": 0o400}}], pod["volumes"]
for name in ("kvsd-server", "kvsd-worker"):
    assert jobs[name]["spec"]["completionMode"] == "Indexed"
svc = [d for d in docs if d["kind"] == "Service"][0]
assert svc["spec"]["selector"] == jobs["kvsd-scheduler"]["spec"]["template"]["metadata"]["labels"]
worker = jobs["kvsd-worker"]["spec"]["template"]["spec"]["containers"][0]
cmd = worker["command"]
assert cmd[:2] == ["/bin/sh", "-c"] and cmd[3:] == ["python3 train.py --epochs 2"], cmd
env = {e["name"]: e.get("value") for e in worker["env"]}
assert env["WORLD_SIZE"] == str(W) and env["LOCAL_WORLD_SIZE"] == str(L), env
idx = [e for e in worker["env"] if e["name"] == "JOB_COMPLETION_INDEX"][0]
assert "job-completion-index" in idx["valueFrom"]["fieldRef"]["fieldPath"], idx
assert "DMLC_WORKER_ID" not in env, env       # set per process by the pod's script
# the script as the container runs it: Kubernetes turns $$ into $
open(script, "w").write(cmd[2].replace("$$", "$"))
print("ok")
EOF
check "manifests: 3 Jobs + a Service; sizes, image, command and DMLC_* agree; no restarts" \
    eval 'grep -qx ok "$WORK/check.out" || { cat "$WORK/check.out"; false; }'
# the worker pod's script, run here as pod 2 of a job with L = 2 (and L = 3):
# one process per local rank, torchrun's variables, the pod fails if one does
pod() { # index L cmd
    JOB_COMPLETION_INDEX=$1 LOCAL_WORLD_SIZE=$2 WORLD_SIZE=$(( 3 * $2 )) \
        timeout 20 /bin/sh -c "$(cat "$WORK/worker.sh")" "$3" >"$WORK/pod.out" 2>&1
}
pod 2 2 'echo "RANK=$RANK DMLC_WORKER_ID=$DMLC_WORKER_ID LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE WORLD_SIZE=$WORLD_SIZE"'; rc=$?
check "worker pod 2 of L=2: ranks 4 and 5, local ranks 0 and 1, exit 0" \
    eval '[[ $rc == 0 ]] && [[ $(sort "$WORK/pod.out" | tr "\n" "|") == "RANK=4 DMLC_WORKER_ID=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 WORLD_SIZE=6|RANK=5 DMLC_WORKER_ID=5 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=6|" ]]'
pod 1 3 'echo "r$RANK"; [ "$LOCAL_RANK" != 1 ]'; rc=$?
check "worker pod 1 of L=3: ranks 3..5 all run; one fails -> the pod fails" \
    eval '[[ $rc != 0 ]] && [[ $(sort "$WORK/pod.out" | tr "\n" " ") == "r3 r4 r5 " ]]'
"$K/render.sh" -w 5 -l 2 >/dev/null 2>"$WORK/err"; rc=$?
check "render.sh -w 5 -l 2 -> exit 2 (W = pods x L)" eval '[[ $rc == 2 ]] && grep -q "is not a multiple of -l 2" "$WORK/err"'
check "no Deployment or StatefulSet (they would restart after the job)" eval '! grep -qE "kind: (Deployment|StatefulSet)" "$K/kvsd-job.yaml.in"'
"$K/render.sh" -s 0 >/dev/null 2>"$WORK/err"; rc=$?
check "render.sh -s 0 -> exit 2" eval '[[ $rc == 2 ]] && grep -q "not a positive integer" "$WORK/err"'
"$K/render.sh" -c 'echo "x"' >/dev/null 2>"$WORK/err"; rc=$?
check "render.sh -c with a double quote -> exit 2" test $rc = 2
ver=$(awk '/^#define KVS_VERSION_(MAJOR|MINOR|PATCH) / { v[$2] = $3 } END { print v["KVS_VERSION_MAJOR"] "." v["KVS_VERSION_MINOR"] "." v["KVS_VERSION_PATCH"] }' "$ROOT/include/kvs.h")
check "default image kvsd:VERSION is the one deploy/docker/Dockerfile documents" eval \
    'grep -q "image: kvsd:$ver$" "$K/kvsd-job.yaml" && grep -q "docker build -f deploy/docker/Dockerfile -t kvsd:$ver ." "$ROOT/deploy/docker/Dockerfile"'
check "Dockerfile: Debian slim stages, make install, runs --version" eval \
    '[[ $(grep -c "^FROM debian:[a-z]*-slim" "$ROOT/deploy/docker/Dockerfile") == 2 ]] && grep -q "make NVCC= install DESTDIR=/out PREFIX=/usr/local" "$ROOT/deploy/docker/Dockerfile" && grep -q "kvs-scheduler --version" "$ROOT/deploy/docker/Dockerfile"'
check "Dockerfile: Python with NumPy, and the image imports the kvsd package" eval \
    'grep -q "python3 python3-numpy" "$ROOT/deploy/docker/Dockerfile" && grep -q "ENV PYTHONPATH=/usr/local/lib/python3/site-packages" "$ROOT/deploy/docker/Dockerfile" && grep -q "python3 -c .import kvsd" "$ROOT/deploy/docker/Dockerfile"'

echo "deploy: $pass passed, $fail failed"
[[ $fail == 0 ]]
