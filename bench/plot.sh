#!/bin/sh
# plot.sh [DIR] - DIR/data/*.txt (written by bench/run.sh) -> DIR/plots/*.svg
# with gnuplot (Debian: gnuplot-nox).  DIR: bench/ (the recorded data) by
# default; bench/run.sh passes its BENCH_OUT.
#   gbps-by-size.svg   pushpull GB/s of one worker by key size: kvsd with
#                      same-host direct copies and through the sockets, 1x1
#                      and 2x2, against the floors (raw ZeroMQ echo over
#                      loopback TCP, memcpy)
#   round-by-keys.svg  time of one round (pushpull of every key, 64 KiB each,
#                      2 workers x 2 servers) by the number of keys
#   tree-vs-flat.svg   8 simulated devices (DGX-1 link matrix, copies paced by
#                      the link weights): local reduce + broadcast time by size,
#                      flat (one merge device) against the planned trees
set -eu
cd "${1:-$(dirname "$0")}"
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p plots
d=data
# "4K" -> 4096 ...
tobytes='function b(s) { m = 1; if (s ~ /K$/) m = 1024; else if (s ~ /M$/) m = 1048576; else if (s ~ /G$/) m = 1073741824; sub(/[KMG]$/, "", s); return s * m }'
# kvs-bench tables: size dtype op iters median p99 GB/s agg check -> bytes GB/s (pushpull rows)
# device bench: mode size iters median p99 GB/s/device check
if [ -f "$d/dev-paced.txt" ]; then
    for m in flat tree; do
        awk "$tobytes"' $1 == "'$m'" && NF >= 6 { print b($2), $4 }' "$d/dev-paced.txt" > "$d/dev-$m.dat"
    done
fi
for f in cma-1x1 cma-2x2 sock-1x1 sock-2x2; do
    [ -f "$d/$f.txt" ] || continue
    awk "$tobytes"' $3 == "pushpull" && $2 == "float32" { print b($1), $7 }' "$d/$f.txt" > "$d/$f.dat"
done
# zmq echo: size iters median p99 GB/s
[ -f "$d/zmq.txt" ] && awk "$tobytes"' $1 ~ /^[0-9]+[KMG]?$/ && NF == 5 { print b($1), $5 }' "$d/zmq.txt" > "$d/zmq.dat"
# memcpy (reduce --json): bytes and memcpy_gbs
[ -f "$d/memcpy.txt" ] && sed -n 's/.*"bytes":\([0-9]*\).*"memcpy_gbs":\([0-9.]*\).*/\1 \2/p' "$d/memcpy.txt" > "$d/memcpy.dat"
# keys: keys and median_ms (--json rows)
: > "$d/keys.dat"
for n in ${KEYCOUNTS:-1 4 16 64 256 1024}; do
    [ -f "$d/keys-$n.txt" ] || continue
    sed -n 's/.*"keys": \([0-9]*\),.*"median_ms": \([0-9.]*\),.*"p99_ms": \([0-9.]*\),.*/\1 \2 \3/p' "$d/keys-$n.txt" | head -n 1 >> "$d/keys.dat"
done

plot_series() { # file title style -> a gnuplot plot clause, or nothing
    [ -s "$d/$1.dat" ] && printf "'%s' using 1:2 with linespoints title '%s' %s, " "$d/$1.dat" "$2" "$3"
    return 0
}
series=$(plot_series memcpy "memcpy (floor of any copy)" "dt 2 lc rgb '#888888'")$(plot_series zmq "raw ZeroMQ echo, loopback TCP" "dt 3 lc rgb '#444444'")$(plot_series cma-1x1 "kvsd 1x1, direct copies" "lc rgb '#1f77b4'")$(plot_series cma-2x2 "kvsd 2x2, direct copies" "lc rgb '#2ca02c'")$(plot_series sock-1x1 "kvsd 1x1, sockets only" "lc rgb '#ff7f0e'")$(plot_series sock-2x2 "kvsd 2x2, sockets only" "lc rgb '#d62728'")
if [ -n "$series" ]; then
    gnuplot <<GP
set terminal svg size 820,480 dynamic font 'sans,12' background rgb 'white'
set output 'plots/gbps-by-size.svg'
set title 'pushpull throughput of one worker by key size (float32)'
set logscale x 2
set logscale y 10
set xlabel 'key size (bytes)'
set ylabel 'GB/s (2 x size / median round time)'
set format x '%.0b%B'
set key top left
set grid
plot ${series%, }
GP
fi
if [ -s "$d/keys.dat" ]; then
    gnuplot <<GP
set terminal svg size 820,480 dynamic font 'sans,12' background rgb 'white'
set output 'plots/round-by-keys.svg'
set title 'one round (pushpull of N keys of 64 KiB), 2 workers x 2 servers'
set logscale x 2
set logscale y 10
set xlabel 'keys in the round'
set ylabel 'ms'
set key top left
set grid
plot '$d/keys.dat' using 1:2 with linespoints title 'median', '$d/keys.dat' using 1:3 with linespoints dt 2 title 'p99'
GP
fi
if [ -s "$d/dev-flat.dat" ] && [ -s "$d/dev-tree.dat" ]; then
    gnuplot <<GP
set terminal svg size 820,480 dynamic font 'sans,12' background rgb 'white'
set output 'plots/tree-vs-flat.svg'
set title '8 simulated devices (DGX-1 links, paced): one round by key size'
set logscale x 2
set logscale y 10
set xlabel 'key size (bytes)'
set ylabel 'median ms'
set format x '%.0b%B'
set key top left
set grid
plot '$d/dev-flat.dat' using 1:2 with linespoints title 'flat (one merge device)', '$d/dev-tree.dat' using 1:2 with linespoints title 'trees (MXNET_KVSTORE_USETREE=1)'
GP
fi
ls plots/*.svg 2>/dev/null | sed "s|^|plot.sh: wrote $(pwd)/|"
