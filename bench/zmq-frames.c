/* zmq-frames.c - what ZeroMQ alone costs for many messages: N pieces of
 * SIZE bytes sent (zero copy) from a DEALER to a ROUTER in another process
 * that echoes them back, the sender copying each answer out; as N messages,
 * as one message of N frames, and as one message of N x SIZE bytes.  Prints
 * the median of 200 rounds of each.  Not built by make:
 *   cc -O2 -o zx bench/zmq-frames.c -lzmq && ./zx 200 65536 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <zmq.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void nofree(void *d, void *h){(void)d;(void)h;}
int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[1]) > 4000 || atol(argv[2]) < 1) {
        fprintf(stderr, "usage: zx N SIZE (1 <= N <= 4000)\n");
        return 2;
    }
    int N = atoi(argv[1]); size_t SZ = (size_t)atol(argv[2]); int iters = 200;
    int p[2]; pipe(p);
    pid_t pid = fork();
    if (pid == 0) {
        void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
        zmq_bind(s, "tcp://127.0.0.1:0"); char ep[128]; size_t l = sizeof ep;
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &l); write(p[1], ep, sizeof ep);
        for (;;) { /* echo whole messages (all frames) */
            static zmq_msg_t m[4096]; int n = 0, more = 1;
            while (more) { zmq_msg_init(&m[n]); if (zmq_msg_recv(&m[n], s, 0) < 0) _exit(0); more = zmq_msg_more(&m[n]); n++; }
            if (n == 2 && zmq_msg_size(&m[1]) == 0) _exit(0);
            for (int i = 0; i < n; i++) zmq_msg_send(&m[i], s, i + 1 < n ? ZMQ_SNDMORE : 0);
        }
    }
    char ep[128]; read(p[0], ep, sizeof ep);
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    zmq_connect(s, ep);
    char *buf = malloc((size_t)N * SZ); memset(buf, 1, (size_t)N * SZ);
    char *in = malloc((size_t)N * SZ);
    for (int mode = 0; mode < 3; mode++) {
        double best[400]; 
        for (int it = 0; it < iters; it++) {
            double t0 = now();
            if (mode == 0) { /* N messages */
                for (int i = 0; i < N; i++) { zmq_msg_t m; zmq_msg_init_data(&m, buf + i * SZ, SZ, nofree, NULL); zmq_msg_send(&m, s, 0); }
                for (int i = 0; i < N; i++) { zmq_msg_t m; zmq_msg_init(&m); zmq_msg_recv(&m, s, 0); memcpy(in + i * SZ, zmq_msg_data(&m), SZ); zmq_msg_close(&m); }
            } else if (mode == 1) { /* one message of N frames */
                for (int i = 0; i < N; i++) { zmq_msg_t m; zmq_msg_init_data(&m, buf + i * SZ, SZ, nofree, NULL); zmq_msg_send(&m, s, i + 1 < N ? ZMQ_SNDMORE : 0); }
                for (int i = 0; i < N; i++) { zmq_msg_t m; zmq_msg_init(&m); zmq_msg_recv(&m, s, 0); memcpy(in + i * SZ, zmq_msg_data(&m), SZ); zmq_msg_close(&m); }
            } else { /* one message of N*SZ */
                zmq_msg_t m; zmq_msg_init_data(&m, buf, N * SZ, nofree, NULL); zmq_msg_send(&m, s, 0);
                zmq_msg_init(&m); zmq_msg_recv(&m, s, 0); memcpy(in, zmq_msg_data(&m), N * SZ); zmq_msg_close(&m);
            }
            best[it] = now() - t0;
        }
        for (int i = 0; i < iters; i++) for (int j = i + 1; j < iters; j++) if (best[j] < best[i]) { double x = best[i]; best[i] = best[j]; best[j] = x; }
        printf("%s: median %.3f ms\n", mode == 0 ? "N messages" : mode == 1 ? "1 msg N frames" : "1 big msg", best[iters / 2] * 1e3);
    }
    zmq_send(s, "", 0, 0);
    waitpid(pid, NULL, 0);
    return 0;
}
