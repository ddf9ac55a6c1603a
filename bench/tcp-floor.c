/* tcp-floor.c - the loopback TCP floor for kvs-bench's socket path (what
 * iperf3 -l 1M would measure): one process sends SIZE bytes in 1 MiB
 * writes over 127.0.0.1, another reads them (1 MiB reads) and answers one
 * byte when it has all; the time from the first write to that byte, median
 * of ITERS transfers on one connection.
 *
 *   tcp-floor [SIZE_MIB [ITERS [app]]]     (default 64 MiB, 10 transfers)
 *
 * Both ends reuse one 1 MiB buffer, which stays in the CPU's cache: the
 * kernel's copies never miss.  With "app" they move a SIZE array instead,
 * as an application does (the sender writes consecutive 1 MiB pieces of it,
 * the receiver reads into consecutive pieces of its own; both arrays are
 * touched before the first transfer, so no page faults): the same syscalls,
 * but copies from and into memory bigger than the cache.
 *
 * Prints "tcp-floor: 64 MiB in 1 MiB writes: median 13.1 ms, 5.12 GB/s"
 * ("... writes from and into 64 MiB arrays: ..." with app). */
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

#define CHUNK (1u << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int full_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int receiver(int lfd, uint64_t size, int iters, int app)
{
    int fd = accept(lfd, NULL, NULL);
    char *buf = malloc(app ? size : CHUNK);
    if (fd < 0 || buf == NULL)
        return 1;
    memset(buf, 0, app ? size : CHUNK);
    for (int it = 0; it < iters; it++) {
        uint64_t got = 0;
        while (got < size) {
            uint64_t left = size - got;
            ssize_t r = read(fd, app ? buf + got : buf, left < CHUNK ? left : CHUNK);
            if (r <= 0)
                return 1;
            got += (uint64_t)r;
        }
        if (full_write(fd, "k", 1) != 0)
            return 1;
    }
    close(fd);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int app = argc > 3 && strcmp(argv[3], "app") == 0;
    if (mib < 1 || mib > 65536 || iters < 1 || iters > 10000 || (argc > 3 && !app) || argc > 4) {
        fprintf(stderr, "usage: tcp-floor [SIZE_MIB (1..65536) [ITERS (1..10000) [app]]]\n");
        return 2;
    }
    uint64_t size = mib << 20;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        perror("tcp-floor: listen");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("tcp-floor: fork");
        return 1;
    }
    if (pid == 0)
        _exit(receiver(lfd, size, iters, app));
    close(lfd);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    char *buf = malloc(app ? size : CHUNK), ack;
    double *t = calloc((size_t)iters, sizeof *t);
    if (fd < 0 || buf == NULL || t == NULL || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("tcp-floor: connect");
        return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(buf, 0x5a, app ? size : CHUNK);
    for (int it = 0; it < iters; it++) {
        double t0 = now_s();
        for (uint64_t sent = 0; sent < size; sent += CHUNK)
            if (full_write(fd, app ? buf + sent : buf, size - sent < CHUNK ? size - sent : CHUNK) !=
                0) {
                perror("tcp-floor: write");
                return 1;
            }
        if (read(fd, &ack, 1) != 1) {
            perror("tcp-floor: read");
            return 1;
        }
        t[it] = now_s() - t0;
    }
    close(fd);
    int st = 0;
    waitpid(pid, &st, 0);
    qsort(t, (size_t)iters, sizeof *t, cmp);
    double med = t[iters / 2];
    printf("tcp-floor: %llu MiB in 1 MiB writes%s: median %.2f ms, %.2f GB/s (%d transfers)\n",
           (unsigned long long)mib, app ? " from and into arrays of that size" : "", med * 1e3,
           (double)size / med / 1e9, iters);
    free(buf);
    free(t);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
