#!/bin/sh
# Install the Debian packages kvsd needs, if any is missing.  A quiet no-op
# when everything is present.  Needs root (or sudo) to install.
#   install-deps.sh run        building and running: a C compiler, make,
#                              pkg-config and the three libraries (make demo)
#   install-deps.sh run test   that plus what the tests, the benchmarks and
#                              the Python examples add (make test, make bench)
set -eu
# build and run: cc and make (build-essential), the ZeroMQ, libuv and
# libsodium headers and libraries, pkg-config
RUN="build-essential pkg-config libzmq3-dev libuv1-dev libsodium-dev"
# tests and benchmarks:
# check: the unit tests; prometheus: promtool checks the /metrics text (tests/ops);
# gnuplot-nox: make bench plots; python3-*: the kvsd package (NumPy), its
# tests (pytest) and the PyTorch example; iproute2, iptables: the multi-host
# tests (tests/netns/); clang, libfuzzer-14-dev: make fuzz (libFuzzer targets;
# make test replays with cc); libgloo-dev: the Gloo allreduce the benchmarks
# compare against (bench/gloo/)
TEST="check prometheus gnuplot-nox python3 python3-numpy python3-pytest python3-torch \
python3-sklearn iproute2 iptables clang libfuzzer-14-dev libgloo-dev"
[ $# -gt 0 ] || set -- run test
pkgs=""
for set in "$@"; do
    case $set in
    run) pkgs="$pkgs $RUN" ;;
    test) pkgs="$pkgs $TEST" ;;
    *) echo "install-deps: '$set': expected run or test" >&2; exit 2 ;;
    esac
done
need=""
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for p in $pkgs; do
    have "$p" || need="$need $p"
done
[ -z "$need" ] && exit 0
echo "install-deps: installing:$need" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "install-deps: missing packages:$need; run as root: apt-get install$need" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || { echo "install-deps: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $need >&2 || {
    echo "install-deps: apt-get install$need failed" >&2; exit 1; }
