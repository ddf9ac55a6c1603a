/* ps-floor.c - how fast this machine's loopback TCP moves the bytes of one
 * parameter-server round, with nothing else done to them.
 *
 *   ps-floor TOTAL_MIB [ITERS]
 *
 * A W x S pushpull of SIZE bytes sends 2 x W x SIZE bytes through TCP per
 * round (every worker pushes SIZE and pulls SIZE); a 2-rank ring allreduce
 * sends SIZE.  This moves TOTAL_MIB as N parallel one-way streams over
 * 127.0.0.1, for N = 1, 2 and 4: N sender processes, each writing TOTAL/N
 * from an array of its own in 1 MiB writes, and N receiver processes
 * reading into arrays of their own (every array touched first), each
 * answering one byte when it has all.  A transfer starts when the parent
 * tells every sender to go and ends when the last sender has its answer;
 * the median of ITERS transfers per N, and the best N, are printed.  No
 * sums, no framing, no user-space copies, no waiting between the pushes
 * and the pulls: a lower bound on what any parameter server's round costs
 * through these sockets on this machine.
 *
 * Prints one line per N and then
 * "ps-floor: 256 MiB: best 49.512 ms (2 streams)". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PIECE (1u << 20)
#define MAXN 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int full_write(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int full_read(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int receiver(int lfd, uint64_t len, int iters)
{
    int fd = accept(lfd, NULL, NULL);
    char *buf = malloc(len);
    if (fd < 0 || buf == NULL)
        return 1;
    memset(buf, 0, len);
    for (int it = 0; it < iters; it++) {
        for (uint64_t got = 0; got < len;) {
            uint64_t left = len - got;
            ssize_t r = read(fd, buf + got, left < PIECE ? left : PIECE);
            if (r <= 0)
                return 1;
            got += (uint64_t)r;
        }
        if (full_write(fd, "k", 1) != 0)
            return 1;
    }
    return 0;
}

/* waits for a go byte per transfer, sends, reports the time its answer came */
static int sender(const struct sockaddr_in *a, uint64_t len, int iters, int go_fd, int done_fd)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    char *buf = malloc(len), c;
    if (fd < 0 || buf == NULL || connect(fd, (const struct sockaddr *)a, sizeof *a) != 0)
        return 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(buf, 0x5a, len);
    double ready = 0;
    if (full_write(done_fd, &ready, sizeof ready) != 0)
        return 1;
    for (int it = 0; it < iters; it++) {
        if (full_read(go_fd, &c, 1) != 0)
            return 1;
        for (uint64_t sent = 0; sent < len; sent += PIECE)
            if (full_write(fd, buf + sent, len - sent < PIECE ? len - sent : PIECE) != 0)
                return 1;
        if (read(fd, &c, 1) != 1)
            return 1;
        double t = now_s();
        if (full_write(done_fd, &t, sizeof t) != 0)
            return 1;
    }
    return 0;
}

/* N streams of total/N bytes: the median transfer in ms, or < 0 */
static double run(int n, uint64_t total, int iters)
{
    uint64_t len = total / (uint64_t)n;
    pid_t pid[2 * MAXN];
    int np = 0, go[MAXN][2], done[2], bad = 0;
    double *t = calloc((size_t)iters, sizeof *t);
    if (t == NULL || pipe(done) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof a;
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 1) != 0 ||
            getsockname(lfd, (struct sockaddr *)&a, &alen) != 0 || pipe(go[i]) != 0) {
            perror("ps-floor: listen");
            return -1;
        }
        if ((pid[np] = fork()) == 0) { /* holds nothing a failure must close */
            close(done[0]);
            close(done[1]);
            for (int j = 0; j <= i; j++)
                close(go[j][1]);
            close(go[i][0]);
            _exit(receiver(lfd, len, iters));
        }
        np += pid[np] > 0;
        if ((pid[np] = fork()) == 0) {
            close(lfd);
            for (int j = 0; j <= i; j++)
                close(go[j][1]);
            close(done[0]);
            _exit(sender(&a, len, iters, go[i][0], done[1]));
        }
        np += pid[np] > 0;
        close(lfd);
        close(go[i][0]);
    }
    close(done[1]);
    double x;
    for (int i = 0; i < n && !bad; i++) /* every sender connected, arrays touched */
        bad = full_read(done[0], &x, sizeof x) != 0;
    for (int it = 0; it < iters && !bad; it++) {
        double t0 = now_s(), last = t0;
        for (int i = 0; i < n && !bad; i++)
            bad = full_write(go[i][1], "g", 1) != 0;
        for (int i = 0; i < n && !bad; i++) {
            bad = full_read(done[0], &x, sizeof x) != 0;
            last = x > last ? x : last;
        }
        t[it] = (last - t0) * 1e3;
    }
    for (int i = 0; i < n; i++)
        close(go[i][1]); /* ends every sender, and so every receiver, on a failure */
    close(done[0]);
    for (int i = 0; i < np; i++) {
        int st = 0;
        waitpid(pid[i], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    bad |= np != 2 * n;
    qsort(t, (size_t)iters, sizeof *t, cmp);
    double med = bad ? -1 : t[iters / 2];
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    if (argc < 2 || argc > 3 || mib < MAXN || mib > 65536 || mib % MAXN != 0 || iters < 1 ||
        iters > 10000) {
        fprintf(stderr, "usage: ps-floor TOTAL_MIB (4..65536, a multiple of 4) [ITERS (1..10000)]\n");
        return 2;
    }
    uint64_t total = mib << 20;
    double best = -1;
    int bestn = 0;
    for (int n = 1; n <= MAXN; n *= 2) {
        double ms = run(n, total, iters);
        if (ms < 0) {
            fprintf(stderr, "ps-floor: %d streams failed\n", n);
            return 1;
        }
        printf("ps-floor: %llu MiB as %d stream%s: median %.3f ms, %.2f GB/s (%d transfers)\n",
               (unsigned long long)mib, n, n > 1 ? "s" : "", ms, (double)total / ms / 1e6, iters);
        if (best < 0 || ms < best) {
            best = ms;
            bestn = n;
        }
    }
    printf("ps-floor: %llu MiB: best %.3f ms (%d stream%s)\n", (unsigned long long)mib, best,
           bestn, bestn > 1 ? "s" : "");
    return 0;
}
