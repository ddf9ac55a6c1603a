#!/bin/sh
# render.sh - write a kvsd Kubernetes job (kvsd-job.yaml.in filled in) to stdout.
#
#   render.sh [-s SERVERS] [-w WORKERS] [-l PER_POD] [-i IMAGE] [-c WORKER_COMMAND]
#
# The one place the job size is set: -s and -w go into DMLC_NUM_SERVER /
# DMLC_NUM_WORKER of every pod and into the server and worker Jobs' sizes;
# -l workers run in each worker pod (one per GPU; W/L pods, a local group).
# Defaults: -s 2 -w 4 -l 1 -i kvsd:VERSION (deploy/docker/Dockerfile's image)
# -c 'kvs-bench --sizes 4M'.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# the image tag is the version in include/kvs.h (the one place it is written)
ver=$(awk '/^#define KVS_VERSION_(MAJOR|MINOR|PATCH) / { v[$2] = $3 }
           END { if (v["KVS_VERSION_MAJOR"] != "") print v["KVS_VERSION_MAJOR"] "." v["KVS_VERSION_MINOR"] "." v["KVS_VERSION_PATCH"] }' \
      "$here/../../include/kvs.h" 2>/dev/null || true)
S=2 W=4 L=1 IMAGE=kvsd:${ver:-latest} CMD='kvs-bench --sizes 4M'
usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; }
while getopts s:w:l:i:c:h opt; do
    case $opt in
        s) S=$OPTARG ;;
        w) W=$OPTARG ;;
        l) L=$OPTARG ;;
        i) IMAGE=$OPTARG ;;
        c) CMD=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "render.sh: unexpected argument '$1'" >&2; exit 2; }
for v in "$S" "$W" "$L"; do
    case $v in ''|*[!0-9]*|0*) echo "render.sh: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
[ $((W % L)) -eq 0 ] || { echo "render.sh: -w $W is not a multiple of -l $L (W = pods x L)" >&2; exit 2; }
case $IMAGE in *[!A-Za-z0-9._:/@-]*|'') echo "render.sh: -i '$IMAGE' is not an image name" >&2; exit 2 ;; esac
case $CMD in *'"'*|*'\'*|*'@'*|*'|'*) echo "render.sh: -c: no double quotes, backslashes, '@' or '|' (write a script)" >&2; exit 2 ;; esac
sed -e "s|@NUM_SERVER@|$S|g" -e "s|@NUM_WORKER@|$W|g" -e "s|@IMAGE@|$IMAGE|g" \
    -e "s|@NPROC@|$L|g" -e "s|@NUM_WORKER_PODS@|$((W / L))|g" \
    -e "s|@WORKER_CMD@|$CMD|g" "$here/kvsd-job.yaml.in"
