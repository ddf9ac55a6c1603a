# bench/lib.sh - shell helpers the bench scripts share (POSIX sh; sourced
# from the repository root: `. bench/lib.sh`).

# median: the median of the numbers on stdin (separated by spaces or new
# lines); the mean of the middle two for an even count.
median() {
    tr ' ' '\n' | grep -v '^$' | sort -g |
        awk '{v[NR] = $1} END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Two namespace hosts joined by one veth pair, for the scripts that run a
# job across two simulated hosts.  The caller sets A and B (the namespace
# names), tag (the veths are $tag-va in A and $tag-vb in B), IPA and IPB
# (their /24 addresses) and defines die.
# pair_del: kill whatever still runs in the two namespaces, then delete
# them (the veth pair goes with them).
pair_del() {
    for _ns in "$A" "$B"; do
        for _p in $(ip netns pids "$_ns" 2>/dev/null); do kill -KILL "$_p" 2>/dev/null; done
        ip netns del "$_ns" 2>/dev/null
    done
    return 0
}

# pair_up RATE [BURST [MTU]]: (re)create them, each veth shaped to RATE
# (tc tbf, BURST default 512kb; RATE empty: unshaped) with MTU if given.
pair_up() {
    pair_del
    ip netns add "$A" && ip netns add "$B" || die "cannot create network namespaces"
    ip link add "$tag-va" type veth peer name "$tag-vb" || die "cannot create a veth pair"
    ip link set "$tag-va" netns "$A" && ip link set "$tag-vb" netns "$B" || die "cannot move the veths"
    ip -n "$A" addr add "$IPA/24" dev "$tag-va" && ip -n "$B" addr add "$IPB/24" dev "$tag-vb" ||
        die "cannot address the veths"
    ip -n "$A" link set lo up && ip -n "$B" link set lo up || die "cannot bring loopback up"
    if [ -n "${3:-}" ]; then
        ip -n "$A" link set "$tag-va" mtu "$3" && ip -n "$B" link set "$tag-vb" mtu "$3" ||
            die "cannot set the MTU to $3"
    fi
    ip -n "$A" link set "$tag-va" up && ip -n "$B" link set "$tag-vb" up || die "cannot bring the veths up"
    if [ -n "$1" ]; then
        ip netns exec "$A" tc qdisc add dev "$tag-va" root tbf rate "$1" burst "${2:-512kb}" latency 50ms &&
            ip netns exec "$B" tc qdisc add dev "$tag-vb" root tbf rate "$1" burst "${2:-512kb}" latency 50ms ||
            die "cannot shape the veths to $1"
    fi
}

# pair_cleanup NAME: the EXIT trap of those scripts: kill the processes in
# $pids, delete the two hosts, and remove $dir (kept with KEEP=1, saying
# so under NAME).
pair_cleanup() {
    for _p in $pids; do kill -KILL "$_p" 2>/dev/null; done
    for _p in $pids; do wait "$_p" 2>/dev/null; done
    pair_del
    if [ "${KEEP:-0}" = 1 ]; then echo "$1: logs kept in $dir" >&2; else rm -rf "$dir"; fi
}
