/* run-http.c - a plain driver for fuzz_http.c (no libFuzzer), so the HTTP
 * parser's corpus and random inputs run in make test.
 *
 *   run-http [-n N] [-s SEED] [DIR|FILE]...   replay the files, the built-in
 *                                            seeds, then N random inputs
 *                                            (mutations of those, noise)
 * Exit 0 when every input passed; a failing input aborts after printing it.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IN (HTTP_MAX_HEAD + 512)

static char *ins[4096];
static size_t lens[4096], nins;

static void add(const char *d, size_t n)
{
    if (nins >= sizeof ins / sizeof ins[0])
        return;
    ins[nins] = malloc(n ? n : 1);
    memcpy(ins[nins], d, n);
    lens[nins++] = n;
}

static void add_str(const char *s)
{
    add(s, strlen(s));
}

static void add_path(const char *p)
{
    struct stat st;
    if (stat(p, &st) != 0) {
        fprintf(stderr, "run-http: %s: not found\n", p);
        exit(2);
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(p);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char f[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(f, sizeof f, "%s/%s", p, e->d_name);
            add_path(f);
        }
        if (d)
            closedir(d);
        return;
    }
    FILE *f = fopen(p, "rb");
    char *buf = malloc(MAX_IN);
    size_t n = f ? fread(buf, 1, MAX_IN, f) : 0;
    if (f)
        fclose(f);
    add(buf, n);
    free(buf);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    long runs = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            runs = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            rng = strtoull(argv[++i], NULL, 0) | 1;
        else
            add_path(argv[i]);
    }
    add_str("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    add_str("GET /metrics HTTP/1.0\n\n");
    add_str("HEAD / HTTP/1.1\r\nUser-Agent: Prometheus/2.42\r\nAccept: text/plain\r\n\r\n");
    add_str("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    add_str("GET /metrics HTTP/2.0\r\n\r\n");
    add_str("GET  /metrics HTTP/1.1\r\n\r\n");
    add_str("GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n");
    add_str("GET /metrics HTTP/1.1\r\nBad Header: x\r\n\r\n");
    add_str("\r\n\r\n");
    add_str("GET /met\0rics HTTP/1.1\r\n\r\n");
    const size_t nseed = nins;
    long failed = 0;
    for (size_t k = 0; k < nseed; k++)
        LLVMFuzzerTestOneInput((const uint8_t *)ins[k], lens[k]);
    char *buf = malloc(MAX_IN);
    for (long r = 0; r < runs; r++) {
        size_t n;
        if (next() % 8 == 0) { /* noise, biased to HTTP-ish bytes */
            n = next() % MAX_IN;
            for (size_t j = 0; j < n; j++) {
                static const char al[] = "GET /metricsHTTP1.0\r\n: \t";
                buf[j] = next() % 4 ? al[next() % (sizeof al - 1)] : (char)next();
            }
        } else {
            size_t k = next() % nseed;
            n = lens[k];
            memcpy(buf, ins[k], n);
            int edits = 1 + (int)(next() % 6);
            for (int e = 0; e < edits; e++) {
                switch (next() % 4) {
                case 0: if (n) buf[next() % n] = (char)next(); break;
                case 1: if (n) n = next() % n; break; /* truncate */
                case 2: /* grow with a repeated header line */
                    while (n + 10 < MAX_IN && next() % 64) {
                        memcpy(buf + n, "X-A: bbb\r\n", 10);
                        n += 10;
                    }
                    break;
                default: if (n < MAX_IN) buf[n++] = (char)next(); break;
                }
            }
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    }
    free(buf);
    printf("run-http: %zu seeds and files, %ld random inputs: all passed\n", nseed, runs);
    for (size_t k = 0; k < nins; k++)
        free(ins[k]);
    return failed ? 1 : 0;
}
