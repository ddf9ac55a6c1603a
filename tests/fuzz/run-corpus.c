/* run-corpus.c - a plain driver for the fuzz target in fuzz_proto.c, built
 * with any C compiler (no libFuzzer), so the corpus runs in normal CI.
 *
 *   run-corpus [-n N] [-s SEED] [DIR|FILE]...   replay every file, the built-in
 *                                              seeds, then N random inputs
 *                                              (mutations of all of those and
 *                                              pure noise) from SEED
 *   run-corpus --write-seeds DIR               write the built-in seeds as files
 *
 * Exit 0 when every input passed.  A failing input aborts; the handler first
 * prints the input in hex on stderr so it can be saved into the corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvs.h"
#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RC_MAX_INPUT 4096

typedef struct input {
    uint8_t *data;
    size_t len;
    char name[256]; /* file name, or "" for a built-in seed */
} input;

static input *inputs;
static size_t ninputs, capinputs;

/* the input being run, for the crash handler */
static const uint8_t *cur_data;
static size_t cur_len;
static const char *cur_name = "";

static void on_crash(int sig)
{
    static const char hex[] = "0123456789abcdef";
    char line[3];
    const char *msg = "run-corpus: crashed on input ";
    if (write(2, msg, strlen(msg)) < 0 || write(2, cur_name, strlen(cur_name)) < 0 ||
        write(2, ", hex:\n", 7) < 0)
        _exit(128 + sig);
    for (size_t i = 0; i < cur_len; i++) {
        line[0] = hex[cur_data[i] >> 4];
        line[1] = hex[cur_data[i] & 15];
        line[2] = (i % 32 == 31 || i + 1 == cur_len) ? '\n' : ' ';
        if (write(2, line, 3) < 0)
            break;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void add_input(const uint8_t *d, size_t len)
{
    if (ninputs == capinputs) {
        capinputs = capinputs ? capinputs * 2 : 64;
        inputs = realloc(inputs, capinputs * sizeof *inputs);
        if (inputs == NULL) {
            perror("realloc");
            exit(2);
        }
    }
    inputs[ninputs].data = malloc(len ? len : 1);
    if (inputs[ninputs].data == NULL) {
        perror("malloc");
        exit(2);
    }
    memcpy(inputs[ninputs].data, d, len);
    inputs[ninputs].len = len;
    inputs[ninputs].name[0] = '\0';
    ninputs++;
}

static void run_one(const uint8_t *d, size_t len, const char *name)
{
    /* an exact-size copy: reads past the end are caught by sanitizers */
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        perror("malloc");
        exit(2);
    }
    memcpy(copy, d, len);
    cur_data = copy;
    cur_len = len;
    cur_name = name;
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

/* ---- built-in seeds ---- */

static void seed_decode(const proto_hdr *h, int nframes, uint32_t body)
{
    uint8_t buf[6 + PROTO_HDR_SIZE];
    buf[0] = 0;
    buf[1] = (uint8_t)nframes;
    for (int i = 0; i < 4; i++)
        buf[2 + i] = (uint8_t)(body >> (8 * i));
    proto_encode(h, buf + 6);
    add_input(buf, sizeof buf);
}

static void seed_text(int sel, uint8_t param, const char *text)
{
    uint8_t buf[RC_MAX_INPUT];
    size_t n = strlen(text);
    buf[0] = (uint8_t)sel;
    buf[1] = param;
    memcpy(buf + 2, text, n);
    add_input(buf, n + 2);
}

static void add_seeds(void)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = PROTO_PUSH;
    h.sender = 9;
    h.req_id = 1;
    h.key = 42;
    h.count = h.total = 16;
    h.dtype = KVS_FLOAT32;
    h.body_len = 64;
    seed_decode(&h, 2, 64);                /* valid push */
    h.offset = 16;
    h.total = 32;
    h.part = 1;
    seed_decode(&h, 2, 64);                /* second part */
    h.type = PROTO_PUSHPULL;
    h.dtype = KVS_FLOAT16;
    h.body_len = 32;
    seed_decode(&h, 2, 32);
    h.type = PROTO_INIT;
    h.body_len = 0;
    seed_decode(&h, 1, 0);                 /* init from rank > 0 */
    h.type = PROTO_PULL;
    seed_decode(&h, 1, 0);
    h.type = PROTO_REPLY;
    h.status = KVS_ENOKEY;
    h.body_len = 20;
    seed_decode(&h, 2, 20);                /* error reply */
    h.status = 0;
    h.dtype = KVS_INT64;
    h.body_len = 128;
    seed_decode(&h, 2, 128);               /* data reply */
    h.count = (1ull << 61) + 8;            /* count * 8 wraps to 64 */
    h.total = UINT64_MAX;
    h.offset = 0;
    h.body_len = 64;
    seed_decode(&h, 2, 64);
    h.offset = UINT64_MAX - 1;             /* offset + count wraps */
    h.count = 8;
    seed_decode(&h, 2, 64);
    memset(&h, 0, sizeof h);
    h.type = PROTO_REGISTER;
    h.body_len = 40;
    seed_decode(&h, 2, 40);
    h.type = PROTO_REGISTER_ACK;
    h.key = 9;
    h.body_len = 60;
    seed_decode(&h, 2, 60);
    h.type = PROTO_HEARTBEAT;
    h.body_len = 0;
    seed_decode(&h, 1, 0);
    h.type = PROTO_SHUTDOWN;
    h.status = -7;
    seed_decode(&h, 1, 0);
    h.type = PROTO_ERROR;
    h.status = KVS_EPROTO;
    h.body_len = PROTO_ERRTEXT_MAX + 1;
    seed_decode(&h, 2, PROTO_ERRTEXT_MAX + 1);
    h.type = PROTO_BASE_END;
    h.body_len = 0;
    seed_decode(&h, 1, 0);

    seed_text(1, 8, "8 server tcp://10.0.0.1:5000\n9 worker tcp://10.0.0.2:5001\n");
    seed_text(1, 8, "1 server ipc:///tmp/kvs-1\n");
    seed_text(1, 1, "8 server a\n10 server b\n");
    seed_text(1, 8, "8 server tcp://x:1 extra\n");
    seed_text(1, 8, "8 server tcp://x:1");
    seed_text(1, 8, "0 boss\n\n");
    seed_text(2, 127, "role=worker endpoint=tcp://10.0.0.2:5001 rank=3 host=10.0.0.2");
    seed_text(2, 127, "role=server endpoint=- rank=-1 host=h future=1\n");
    seed_text(2, 4, "role=worker endpoint=too-long-for-five");
    seed_text(2, 127, "role=worker rank=x");
    seed_text(2, 127, "endpoint=e role=scheduler");
}

/* ---- files ---- */

static void load_file(const char *path)
{
    uint8_t buf[RC_MAX_INPUT];
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "run-corpus: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    add_input(buf, n);
    snprintf(inputs[ninputs - 1].name, sizeof inputs[ninputs - 1].name, "%s", path);
}

static size_t load_path(const char *path)
{
    struct stat st;
    size_t before = ninputs;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "run-corpus: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        load_file(path);
        return 1;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    if (d == NULL) {
        fprintf(stderr, "run-corpus: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    while ((e = readdir(d)) != NULL) {
        char full[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
            load_file(full);
    }
    closedir(d);
    return ninputs - before;
}

static int write_seeds(const char *dir)
{
    add_seeds();
    mkdir(dir, 0777);
    for (size_t i = 0; i < ninputs; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02zu", dir, i);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(inputs[i].data, 1, inputs[i].len, f) != inputs[i].len) {
            fprintf(stderr, "run-corpus: %s: %s\n", path, strerror(errno));
            return 2;
        }
        fclose(f);
    }
    printf("run-corpus: wrote %zu seeds to %s\n", ninputs, dir);
    return 0;
}

/* ---- random inputs ---- */

static uint64_t rng;
static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static const uint64_t interesting[] = {0, 1, 2, 7, 8, 64, 88, 4096, 4097, 1u << 20,
                                       (1u << 20) + 1, 0x7fffffff, 0x80000000, 0xffffffff,
                                       1ull << 61, 1ull << 62, 1ull << 63, UINT64_MAX - 1,
                                       UINT64_MAX};

static size_t mutate(uint8_t *buf, size_t len)
{
    int rounds = 1 + (int)(rnd() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (rnd() % 7) {
        case 0: /* flip a bit */
            if (len)
                buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
            break;
        case 1: /* random byte */
            if (len)
                buf[rnd() % len] = (uint8_t)rnd();
            break;
        case 2: /* an interesting value at a (header-aligned) offset */
            if (len >= 14) {
                uint64_t v = interesting[rnd() % (sizeof interesting / sizeof interesting[0])];
                size_t w = (size_t)1 << (1 + rnd() % 3), off = 6 + (rnd() % ((len - 6) / w)) * w;
                for (size_t i = 0; i < w && off + i < len; i++)
                    buf[off + i] = (uint8_t)(v >> (8 * i));
            }
            break;
        case 3: /* truncate */
            if (len)
                len = rnd() % len;
            break;
        case 4: /* insert a byte (text bodies: separators are interesting) */
            if (len < RC_MAX_INPUT - 1) {
                static const char seps[] = " \n\t=x0-";
                size_t at = len ? rnd() % (len + 1) : 0;
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = rnd() % 2 ? (uint8_t)seps[rnd() % 7] : (uint8_t)rnd();
                len++;
            }
            break;
        case 5: /* duplicate a chunk */
            if (len > 2 && len < RC_MAX_INPUT / 2) {
                size_t from = rnd() % len, n = 1 + rnd() % (len - from);
                if (len + n <= RC_MAX_INPUT) {
                    memcpy(buf + len, buf + from, n);
                    len += n;
                }
            }
            break;
        default: /* change the parameter byte */
            if (len > 1)
                buf[1] = (uint8_t)rnd();
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    long n = 10000;
    uint64_t seed = 0x5EED1234ABCDull;
    size_t nfiles = 0;
    static uint8_t buf[RC_MAX_INPUT * 2];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--write-seeds") && i + 1 < argc)
            return write_seeds(argv[i + 1]);
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else
            nfiles += load_path(argv[i]);
    }
    signal(SIGABRT, on_crash);
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGFPE, on_crash);

    size_t from_files = ninputs;
    add_seeds();
    for (size_t i = 0; i < ninputs; i++) {
        char name[300];
        if (i < from_files)
            snprintf(name, sizeof name, "%s", inputs[i].name);
        else
            snprintf(name, sizeof name, "seed #%zu", i - from_files);
        run_one(inputs[i].data, inputs[i].len, name);
    }

    rng = seed ? seed : 1;
    for (long it = 0; it < n; it++) {
        size_t len;
        char name[64];
        if (rnd() % 4 != 0 && ninputs > 0) {
            const input *in = &inputs[rnd() % ninputs];
            len = in->len < RC_MAX_INPUT ? in->len : RC_MAX_INPUT;
            memcpy(buf, in->data, len);
            len = mutate(buf, len);
        } else {
            len = rnd() % 200;
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rnd();
            if (len > 0 && rnd() % 2)
                buf[0] = 0; /* decode, with a right magic/version half the time */
            if (len >= 6 + 6 && buf[0] == 0) {
                proto_hdr h;
                memset(&h, 0, sizeof h);
                uint8_t hdr[PROTO_HDR_SIZE];
                proto_encode(&h, hdr);
                memcpy(buf + 6, hdr, 6);
            }
        }
        snprintf(name, sizeof name, "random #%ld (seed 0x%llx)", it, (unsigned long long)seed);
        run_one(buf, len, name);
    }
    printf("run-corpus: %zu corpus files, %zu seeds, %ld random inputs: ok\n", nfiles,
           ninputs - from_files, n);
    for (size_t i = 0; i < ninputs; i++)
        free(inputs[i].data);
    free(inputs);
    return 0;
}
