#!/bin/sh
# Install the Debian packages kvsd needs to build and test, if any is missing.
# A quiet no-op when everything is present.  Needs root (or sudo) to install.
set -eu
need=""
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# prometheus: promtool checks the /metrics text (tests/ops); gnuplot-nox: make bench plots
# python3-*: the kvsd package (NumPy), its tests (pytest) and the PyTorch example
# iproute2, iptables: the multi-host tests (tests/netns/)
# clang, libfuzzer-14-dev: make fuzz (libFuzzer targets; make test replays with cc)
for p in libzmq3-dev libuv1-dev libsodium-dev check pkg-config prometheus gnuplot-nox \
         python3 python3-numpy python3-pytest python3-torch python3-sklearn iproute2 iptables \
         clang libfuzzer-14-dev; do
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
