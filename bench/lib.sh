# bench/lib.sh - shell helpers the bench scripts share (POSIX sh; sourced
# from the repository root: `. bench/lib.sh`).

# median: the median of the numbers on stdin (separated by spaces or new
# lines); the mean of the middle two for an even count.
median() {
    tr ' ' '\n' | grep -v '^$' | sort -g |
        awk '{v[NR] = $1} END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
