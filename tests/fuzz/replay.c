/* replay.c - a plain driver for a fuzz target (fuzz_target.h), built with
 * any C compiler (no libFuzzer), so that a target's corpus runs in make test.
 * Linked with fuzz_proto.c as run-corpus, with fuzz_sched.c as replay-sched
 * and with fuzz_server.c as replay-server.
 *
 *   replay-X [-n N] [-s SEED] [DIR|FILE]...   run every file, the target's
 *                                            built-in seeds, then N random
 *                                            inputs (mutations of all of
 *                                            those, splices, noise) from SEED
 *   replay-X --write-seeds DIR               write the built-in seeds as files
 *
 * Exit 0 when every input passed.  A failing input aborts; the handler first
 * prints its name and the input in hex on stderr, so it can be saved into the
 * corpus.
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

#include "tests/fuzz/fuzz_target.h"

#define RP_MAX_INPUT 8192

typedef struct input {
    uint8_t *data;
    size_t len;
    char name[256]; /* file name, or "" for a built-in seed */
} input;

static input *inputs;
static size_t ninputs, capinputs;
static const char *prog = "replay";

/* the input being run, for the crash handler */
static const uint8_t *cur_data;
static size_t cur_len;
static const char *cur_name = "";

static void put(const char *s)
{
    if (write(2, s, strlen(s)) < 0)
        _exit(99);
}

static void on_crash(int sig)
{
    static const char hex[] = "0123456789abcdef";
    char line[3];
    put(prog);
    put(": crashed on input ");
    put(cur_name);
    put(", hex:\n");
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
    if (len > RP_MAX_INPUT)
        len = RP_MAX_INPUT;
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

static void load_file(const char *path)
{
    static uint8_t buf[RP_MAX_INPUT];
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        exit(2);
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    add_input(buf, n);
    snprintf(inputs[ninputs - 1].name, sizeof inputs[ninputs - 1].name, "%s", path);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of a directory, in name order (a stable replay). */
static size_t load_path(const char *path)
{
    struct stat st;
    size_t before = ninputs, nnames = 0;
    char **names = NULL;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        load_file(path);
        return 1;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    if (d == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        exit(2);
    }
    while ((e = readdir(d)) != NULL) {
        char full[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        names = realloc(names, (nnames + 1) * sizeof *names);
        if (names == NULL || (names[nnames] = strdup(full)) == NULL) {
            perror("malloc");
            exit(2);
        }
        nnames++;
    }
    closedir(d);
    qsort(names, nnames, sizeof *names, by_name);
    for (size_t i = 0; i < nnames; i++) {
        load_file(names[i]);
        free(names[i]);
    }
    free(names);
    return ninputs - before;
}

static int write_seeds(const char *dir)
{
    fz_seeds(add_input);
    mkdir(dir, 0777);
    for (size_t i = 0; i < ninputs; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02zu", dir, i);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(inputs[i].data, 1, inputs[i].len, f) != inputs[i].len) {
            fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
            return 2;
        }
        fclose(f);
    }
    printf("%s: wrote %zu seeds to %s\n", prog, ninputs, dir);
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

static const uint64_t interesting[] = {0, 1, 2, 7, 8, 16, 64, 88, 255, 4096, 4097, 1u << 20,
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
        case 2: /* an interesting value, 1, 2, 4 or 8 bytes */
            if (len >= 8) {
                uint64_t v = interesting[rnd() % (sizeof interesting / sizeof interesting[0])];
                size_t w = (size_t)1 << (rnd() % 4), off = rnd() % (len - w + 1);
                for (size_t i = 0; i < w; i++)
                    buf[off + i] = (uint8_t)(v >> (8 * i));
            }
            break;
        case 3: /* truncate */
            if (len)
                len = rnd() % len;
            break;
        case 4: /* insert a byte */
            if (len < RP_MAX_INPUT) {
                size_t at = len ? rnd() % (len + 1) : 0;
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (uint8_t)rnd();
                len++;
            }
            break;
        case 5: /* duplicate a chunk at the end */
            if (len > 2) {
                size_t from = rnd() % len, n = 1 + rnd() % (len - from);
                if (len + n <= RP_MAX_INPUT) {
                    memcpy(buf + len, buf + from, n);
                    len += n;
                }
            }
            break;
        default: /* splice: the tail of another input */
            if (ninputs) {
                const input *o = &inputs[rnd() % ninputs];
                size_t at = len ? rnd() % len : 0, from = o->len ? rnd() % o->len : 0;
                size_t n = o->len - from;
                if (at + n > RP_MAX_INPUT)
                    n = RP_MAX_INPUT - at;
                memcpy(buf + at, o->data + from, n);
                len = at + n;
            }
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    long n = 1000;
    uint64_t seed = 0x5EED1234ABCDull;
    size_t nfiles = 0;
    static uint8_t buf[RP_MAX_INPUT];
    const char *slash = strrchr(argv[0], '/');
    prog = slash ? slash + 1 : argv[0];

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
    fz_seeds(add_input);
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
        if (rnd() % 8 != 0 && ninputs > 0) {
            const input *in = &inputs[rnd() % ninputs];
            len = in->len;
            memcpy(buf, in->data, len);
            len = mutate(buf, len);
        } else {
            len = rnd() % 300;
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rnd();
        }
        snprintf(name, sizeof name, "random #%ld (seed 0x%llx)", it, (unsigned long long)seed);
        run_one(buf, len, name);
    }
    printf("%s: %zu corpus files, %zu seeds, %ld random inputs: ok\n", prog, nfiles,
           ninputs - from_files, n);
    for (size_t i = 0; i < ninputs; i++)
        free(inputs[i].data);
    free(inputs);
    return 0;
}
