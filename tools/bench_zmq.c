/* bench_zmq.c - `kvs-bench zmq`: raw ZeroMQ echo round trips between two
 * processes over 127.0.0.1, the floor that kvsd's numbers are compared with.
 * The echo side keeps the received message and sends it back (no copy). */
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "tools/bench.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void echo_server(int port_fd)
{
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[128];
    size_t len = sizeof ep;
    zmq_bind(s, "tcp://127.0.0.1:0");
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    int port = atoi(strrchr(ep, ':') + 1);
    if (write(port_fd, &port, sizeof port) != sizeof port)
        _exit(1);
    close(port_fd);
    for (;;) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, s, 0) < 0 || zmq_msg_recv(&body, s, 0) < 0)
            break;
        if (zmq_msg_size(&body) == 0)
            break; /* done */
        zmq_msg_send(&id, s, ZMQ_SNDMORE);
        zmq_msg_send(&body, s, 0);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    _exit(0);
}

static uint64_t parse_size(const char *t)
{
    char *end;
    double v = strtod(t, &end);
    uint64_t m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1024;
    else if (*end == 'M' || *end == 'm')
        m = 1 << 20;
    return v > 0 ? (uint64_t)(v * (double)m) : 0;
}

int bench_zmq_main(int argc, char **argv)
{
    const char *sizes = "4K,256K,4M,64M";
    int iters = 0, fds[2];
    static const struct option longopts[] = {{"sizes", required_argument, NULL, 's'},
                                             {"iters", required_argument, NULL, 'i'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    static const char zusage[] =
        "usage: kvs-bench zmq [--sizes 4K,256K,4M,64M] [--iters N]\n"
        "Raw ZeroMQ DEALER->ROUTER echo between two processes over 127.0.0.1:\n"
        "the transport floor under kvsd's push/pull numbers.\n";
    int ch;
    char *end;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            sizes = optarg;
            break;
        case 'i':
            iters = (int)strtol(optarg, &end, 10);
            if (*end || iters < 1) {
                fprintf(stderr, "kvs-bench zmq: --iters '%s': expected a positive integer\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            fputs(zusage, stdout);
            return 0;
        default:
            fprintf(stderr, "kvs-bench zmq: unknown or incomplete option '%s'\n%s",
                    argv[optind - 1], zusage);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvs-bench zmq: unexpected argument '%s'\n%s", argv[optind], zusage);
        return 2;
    }
    if (pipe(fds) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        echo_server(fds[1]);
    }
    close(fds[1]);
    int port;
    if (read(fds[0], &port, sizeof port) != sizeof port) {
        fprintf(stderr, "kvs-bench zmq: echo process failed\n");
        return 1;
    }
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zmq_connect(s, ep);
    printf("kvs-bench zmq: raw ZeroMQ echo, 2 processes, loopback TCP\n"
           "%-9s %6s %10s %10s %9s\n", "size", "iters", "median_ms", "p99_ms", "GB/s");
    char *dup = strdup(sizes), *save, *t;
    for (t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t bytes = parse_size(t);
        int n = iters ? iters : (int)(256ull * 1024 * 1024 / (bytes ? bytes : 1));
        if (!iters)
            n = n < 10 ? 10 : n > 1000 ? 1000 : n;
        char *buf = malloc(bytes);
        uint64_t *lat = malloc(sizeof *lat * (size_t)n);
        memset(buf, 1, bytes);
        for (int i = -3; i < n; i++) {
            zmq_msg_t m;
            uint64_t t0 = clock_ns();
            zmq_send(s, buf, bytes, 0);
            zmq_msg_init(&m);
            zmq_msg_recv(&m, s, 0);
            memcpy(buf, zmq_msg_data(&m), zmq_msg_size(&m)); /* as a pull would */
            zmq_msg_close(&m);
            if (i >= 0)
                lat[i] = clock_ns() - t0;
        }
        qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
        double med = (double)lat[n / 2] / 1e6, p99 = (double)lat[(int)((n - 1) * 0.99)] / 1e6;
        printf("%-9s %6d %10.3f %10.3f %9.3f\n", t, n, med, p99, 2.0 * (double)bytes / (med / 1e3) / 1e9);
        free(buf);
        free(lat);
    }
    free(dup);
    zmq_send(s, "", 0, 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
    waitpid(pid, NULL, 0);
    return 0;
}
