/*
 * testworker.c - kvs-testworker: the worker program of the integration tests.
 *
 *   kvs-testworker SCENARIO [OPTIONS]
 *
 * One program, many scenarios; the runner starts W copies of it in a job.
 * It exits 0 when every check passed and 1 otherwise, after printing one line
 * per problem: the call, the error name and kvs_last_error(), or for a wrong
 * value "MISMATCH ... key=K ... index=I got=G expected=E".
 *
 * Values.  Worker w pushes, for element i of key k in round r (copy `slot`
 * of a key repeated in one push), a small integer in [-16, 16] drawn from a
 * hash of (w, k, i, r, slot); scaled by 0.25 for float32/float64, by 100003
 * for int32 and by 10000000019 for int64.  Any sum of up to 4 workers x 2
 * copies is exact in every dtype (bfloat16 holds integers up to 256 exactly),
 * so results are compared bit for bit.  Pull buffers are filled with 0xff
 * first (NaN for floats, -1 for integers: never an expected value).
 *
 * Files (in $KVS_TEST_DIR, when set): rank-<rank> (created O_EXCL: two
 * workers with one rank fail), ready-w<DMLC_WORKER_ID>, paused-w<ID>, and
 * the ones a scenario reads (see below).
 */
#include "kvs.h"
#include "tests/integ/half.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 2
#define MAX_ROUNDS 1000
#define MAX_KEYS 64
#define MAX_THREADS 8
#define MISMATCH_LINES 5 /* per key and round */
#define INIT_W 1000       /* "worker" whose values rank 0 passes to kvs_init */

static const char *usage_text =
    "usage: kvs-testworker SCENARIO [OPTIONS]\n"
    "scenarios:\n"
    "  selftest                 check this program's float16/bfloat16 helpers\n"
    "  sum [--type T] [--dtype all|f32,f64,f16,bf16,i32,i64] [--rounds N] [--split]\n"
    "      [--counts N,N,...] [--pushpull] [--dup] [--pipeline] [--threads N]\n"
    "      [--stores N] [--pause-file NAME] [--edge-keys] [--slow-rank R] [--callbacks]\n"
    "                           init, then N rounds of push+pull (or pushpull) with\n"
    "                           exact sums checked element by element; --callbacks:\n"
    "                           per-key waits through kvs_on_complete\n"
    "  many [--keys N] [--counts LIST] [--dtype ...] [--split] [--dup] [--pushpull]\n"
    "       [--rounds N]\n"
    "                           N keys of mixed sizes in one call per round, exact\n"
    "                           sums checked (huge key counts, fusion)\n"
    "  async [--rounds N]       dist_async: pushes accumulate; pull after a barrier\n"
    "  ahead [--rounds N]       1 server, 2 workers: worker 0 pushes N rounds ahead and\n"
    "                           meets the server's KVS_MAX_QUEUED_* bound (KVS_EFULL)\n"
    "  keys-bound [--keys N]    1 server: worker 0 inits keys until KVS_EFULL names the\n"
    "                           server's KVS_MAX_KEY* bound; the created keys sum exactly\n"
    "  barrier [--rounds N]     files written before a barrier all exist after it\n"
    "  api [--type T]           kvs_broadcast (rank 0's values reach every worker's\n"
    "                           outputs, element by element), kvs_is_capable,\n"
    "                           kvs_num_dead_node (0) and their KVS_EINVAL errors\n"
    "  errors                   KVS_EINVAL, KVS_ENOKEY, KVS_ESHAPE; the job goes on\n"
    "  victim [--type T]        init, barrier, ready file, then wait to be killed\n"
    "  group-pulls [--rounds N] [--left]\n"
    "                           push every key, then pulls in a pattern per rank\n"
    "                           (different keys, order and times), exact values;\n"
    "                           then a re-init and a pull of the new values, or with\n"
    "                           --left: the last rank leaves, the others pull again\n"
    "  group-p3 [--rounds N]    24 keys of 4 MiB at priority 0, each in its own\n"
    "                           pushpull, then one of 16 KiB at priority 100: exact\n"
    "                           sums; the high key completes before half of the\n"
    "                           others (kvs_on_complete order)\n"
    "  peer-dead --block pull|barrier|late|callback|pulls [--left] [--keys N] [--type T]\n"
    "                           a blocked (or, after file 'killed', a later) call\n"
    "                           (callback: push+pull, completions through\n"
    "                           kvs_on_complete)\n"
    "                           returns KVS_EPEERDEAD naming the node in file\n"
    "                           'expect-dead' (\"worker 2\"); then kvs_wait,\n"
    "                           kvs_wait_all and kvs_close return it too (the job\n"
    "                           is dead), except with --left (a worker left: only\n"
    "                           the rounds it did not push fail)\n"
    "  early-leave              rank 0: kvs_close before kvs_init; the others'\n"
    "                           kvs_init fails with KVS_EPEERDEAD naming it\n"
    "  leave                    init, barrier, ready file; after file 'go':\n"
    "                           kvs_close while the others still wait for it\n"
    "  too-big                  kvs_init/push/pull of counts whose byte size\n"
    "                           overflows or exceeds KVS_MAX_MESSAGE: KVS_ETOOBIG\n"
    "                           at the call, at once; the store still works\n"
    "  enomem --counts N [--pause-file F]\n"
    "  enomem-push --counts N [--pause-file F]\n"
    "                           (one worker) kvs_init of N float32 returns\n"
    "                           KVS_ENOMEM from a server under a memory limit; a\n"
    "                           small key still sums exactly afterwards\n"
    "  create-error ERRNAME [WORD] [--type T]\n"
    "                           kvs_create fails with ERRNAME and kvs_last_error()\n"
    "                           contains WORD\n";

/* ---- small helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* One line to stdout, prefixed by who (several threads may print). */
static void say(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&out_lock);
    printf("[%s] ", who);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    va_end(ap);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvs-testworker: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("out of memory (%zu bytes)", n);
    return p;
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && v[0] ? v : def;
}

/* Path of a file in $KVS_TEST_DIR, or NULL when it is not set. */
static const char *test_path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("KVS_TEST_DIR");
    if (dir == NULL || dir[0] == '\0')
        return NULL;
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

static int write_test_file(const char *name, const char *text, int excl)
{
    char path[4096], tmp[4200];
    if (test_path(name, path, sizeof path) == NULL)
        return 0;
    if (excl) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0)
            return -errno;
        ssize_t w = write(fd, text, strlen(text));
        close(fd);
        return w < 0 ? -EIO : 0;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -errno;
    fputs(text, f);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -errno;
    return 0;
}

static int test_file_exists(const char *name)
{
    char path[4096];
    return test_path(name, path, sizeof path) && access(path, F_OK) == 0;
}

/* Wait (polling) for a file in $KVS_TEST_DIR; 0 on timeout. */
static int wait_test_file(const char *name, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (!test_file_exists(name)) {
        if (now_s() > deadline)
            return 0;
        nap_ms(5);
    }
    return 1;
}

/* "ready-w<DMLC_WORKER_ID>" (or the rank when the id is unset). */
static void id_file_name(const char *prefix, int rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s-w%s", prefix, env_or("DMLC_WORKER_ID", "?"));
    if (getenv("DMLC_WORKER_ID") == NULL)
        snprintf(buf, len, "%s-r%d", prefix, rank);
}

/* ---- values ---- */

typedef struct val {
    double f;   /* float dtypes */
    uint64_t u; /* integer dtypes, two's complement */
} val;

static int is_float(kvs_dtype d)
{
    return d == KVS_FLOAT32 || d == KVS_FLOAT64 || d == KVS_FLOAT16 || d == KVS_BFLOAT16;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A small integer in [-16, 16] for (w, key, i, round, slot). */
static int64_t small_int(int w, uint64_t key, uint64_t i, int r, int slot)
{
    uint64_t h = mix64(mix64(key * UINT64_C(0x100000001b3) + (uint64_t)slot) ^ mix64(i + 0x51ed27) ^
                       (((uint64_t)(uint32_t)w << 32) | (uint32_t)r));
    return (int64_t)(h % 33) - 16;
}

static val gen(kvs_dtype d, int w, uint64_t key, uint64_t i, int r, int slot)
{
    int64_t s = small_int(w, key, i, r, slot);
    val v = {0, 0};
    switch (d) {
    case KVS_FLOAT32:
    case KVS_FLOAT64: v.f = (double)s * 0.25; break;
    case KVS_FLOAT16:
    case KVS_BFLOAT16: v.f = (double)s; break;
    case KVS_INT32: v.u = (uint64_t)(s * 100003); break;
    case KVS_INT64: v.u = (uint64_t)s * 10000000019ull; break;
    }
    return v;
}

static void put(kvs_dtype d, void *buf, uint64_t i, val v)
{
    switch (d) {
    case KVS_FLOAT32: ((float *)buf)[i] = (float)v.f; break;
    case KVS_FLOAT64: ((double *)buf)[i] = v.f; break;
    case KVS_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)v.f); break;
    case KVS_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v.f); break;
    case KVS_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v.u; break;
    case KVS_INT64: ((int64_t *)buf)[i] = (int64_t)v.u; break;
    }
}

static val get(kvs_dtype d, const void *buf, uint64_t i)
{
    val v = {0, 0};
    switch (d) {
    case KVS_FLOAT32: v.f = ((const float *)buf)[i]; break;
    case KVS_FLOAT64: v.f = ((const double *)buf)[i]; break;
    case KVS_FLOAT16: v.f = f16_to_f32(((const uint16_t *)buf)[i]); break;
    case KVS_BFLOAT16: v.f = bf16_to_f32(((const uint16_t *)buf)[i]); break;
    case KVS_INT32: v.u = (uint64_t)(int64_t)((const int32_t *)buf)[i]; break;
    case KVS_INT64: v.u = (uint64_t)((const int64_t *)buf)[i]; break;
    }
    return v;
}

static int same(kvs_dtype d, val a, val b)
{
    if (is_float(d))
        return a.f == b.f;
    if (d == KVS_INT32)
        return (uint32_t)a.u == (uint32_t)b.u;
    return a.u == b.u;
}

static void add(kvs_dtype d, val *acc, val v)
{
    if (is_float(d))
        acc->f += v.f;
    else
        acc->u += v.u;
}

static const char *fmt_val(kvs_dtype d, val v, char *buf, size_t len)
{
    if (is_float(d))
        snprintf(buf, len, "%.17g", v.f);
    else if (d == KVS_INT32)
        snprintf(buf, len, "%" PRId32, (int32_t)(uint32_t)v.u);
    else
        snprintf(buf, len, "%" PRId64, (int64_t)v.u);
    return buf;
}

static const char *dname(kvs_dtype d)
{
    const char *n = kvs_dtype_name(d);
    return n ? n : "?";
}

/* What a buffer should hold. */
enum expect_kind {
    EXPECT_INIT, /* rank 0's init values */
    EXPECT_ROUND, /* sum over workers (and slots) of one round */
    EXPECT_ALL_ROUNDS, /* sum over workers and rounds 0..round (slot 0) */
    EXPECT_ZERO
};

typedef struct expect {
    enum expect_kind kind;
    int round;
    int nworkers;
    int nslots;
} expect;

static val expected(kvs_dtype d, uint64_t key, uint64_t i, const expect *e)
{
    val acc = {0, 0};
    switch (e->kind) {
    case EXPECT_INIT: return gen(d, INIT_W, key, i, 0, 0);
    case EXPECT_ZERO: return acc;
    case EXPECT_ROUND:
        for (int w = 0; w < e->nworkers; w++)
            for (int s = 0; s < e->nslots; s++)
                add(d, &acc, gen(d, w, key, i, e->round, s));
        return acc;
    case EXPECT_ALL_ROUNDS:
        for (int w = 0; w < e->nworkers; w++)
            for (int r = 0; r <= e->round; r++)
                add(d, &acc, gen(d, w, key, i, r, 0));
        return acc;
    }
    return acc;
}

/* Compare buf (count elements of d for key) with e; print mismatches.
 * Returns the number of wrong elements. */
static uint64_t verify(const char *who, const char *what, uint64_t key, kvs_dtype d,
                       uint64_t count, const void *buf, const expect *e)
{
    uint64_t bad = 0;
    char g[64], x[64];
    for (uint64_t i = 0; i < count; i++) {
        val want = expected(d, key, i, e), got = get(d, buf, i);
        if (same(d, got, want))
            continue;
        if (bad < MISMATCH_LINES)
            say(who, "MISMATCH %s key=%" PRIu64 " dtype=%s count=%" PRIu64 " round=%d index=%" PRIu64
                     " got=%s expected=%s",
                what, key, dname(d), count, e->round, i, fmt_val(d, got, g, sizeof g),
                fmt_val(d, want, x, sizeof x));
        bad++;
    }
    if (bad > MISMATCH_LINES)
        say(who, "MISMATCH %s key=%" PRIu64 " round=%d: %" PRIu64 " of %" PRIu64 " elements wrong", what,
            key, e->round, bad, count);
    return bad;
}

static void fill(kvs_dtype d, void *buf, uint64_t count, int w, uint64_t key, int r, int slot)
{
    for (uint64_t i = 0; i < count; i++)
        put(d, buf, i, gen(d, w, key, i, r, slot));
}

static void *new_buf(kvs_dtype d, uint64_t count)
{
    size_t n = (size_t)count * kvs_dtype_size(d);
    void *p = xmalloc(n);
    memset(p, 0xff, n);
    return p;
}

static kvs_array arr(void *data, uint64_t count, kvs_dtype d)
{
    kvs_array a = {data, count, d, KVS_CPU};
    return a;
}

/* Report a failed call: "push: KVS_ESHAPE (...): last error". */
static int report(const char *who, const char *call, int rc)
{
    if (rc != 0)
        say(who, "%s failed: %s (%s): %s", call, kvs_errname(rc), kvs_strerror(rc), kvs_last_error());
    return rc != 0;
}

/* ---- options ---- */

typedef struct opts {
    const char *type;
    kvs_dtype dtypes[KVS_NUM_DTYPES];
    int ndtypes;
    int rounds;
    int split;
    uint64_t counts[16];
    int ncounts;
    uint64_t nkeys; /* many: --keys */
    int pushpull, dup, pipeline, threads, stores;
    int edge_keys; /* the first two keys are 0 and UINT64_MAX */
    int slow_rank; /* this rank waits 100 ms before each push (-1: none) */
    const char *pause_file;
    const char *block;
    int left; /* peer-dead: a worker left (kvs_close) instead of dying */
    int callbacks; /* sum: per-key waits through kvs_on_complete */
    uint64_t bound;
    /* create-error */
    const char *errname, *word;
} opts;

static int parse_dtype(const char *s, kvs_dtype *d)
{
    static const struct {
        const char *name;
        kvs_dtype d;
    } names[] = {{"f32", KVS_FLOAT32},  {"float32", KVS_FLOAT32}, {"f64", KVS_FLOAT64},
                 {"float64", KVS_FLOAT64}, {"f16", KVS_FLOAT16}, {"float16", KVS_FLOAT16},
                 {"bf16", KVS_BFLOAT16}, {"bfloat16", KVS_BFLOAT16}, {"i32", KVS_INT32},
                 {"int32", KVS_INT32},   {"i64", KVS_INT64},     {"int64", KVS_INT64}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *d = names[i].d;
            return 0;
        }
    return -1;
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        die("%s '%s': expected an integer in [%ld, %ld]", opt, s, min, max);
    return v;
}

static void parse_opts(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->type = "dist_sync";
    o->rounds = 3;
    o->threads = 1;
    o->stores = 1;
    o->block = "pull";
    o->slow_rank = -1;
    o->bound = 1000000;
    const char *b = getenv("MXNET_KVSTORE_BIGARRAY_BOUND");
    if (b && b[0])
        o->bound = strtoull(b, NULL, 10);
    if (o->bound == 0)
        o->bound = 1000000;
    for (int d = 0; d < KVS_NUM_DTYPES; d++)
        o->dtypes[o->ndtypes++] = (kvs_dtype)d;
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                         \
    do {                                               \
        if (next == NULL)                              \
            die("option %s needs a value", a);         \
        i++;                                           \
    } while (0)
        if (strcmp(a, "--type") == 0) {
            NEED();
            o->type = next;
        } else if (strcmp(a, "--dtype") == 0) {
            NEED();
            if (strcmp(next, "all") != 0) {
                char *copy = strdup(next), *save = NULL;
                o->ndtypes = 0;
                for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                    if (o->ndtypes == KVS_NUM_DTYPES || parse_dtype(tok, &o->dtypes[o->ndtypes]) != 0)
                        die("--dtype: bad dtype '%s'", tok);
                    o->ndtypes++;
                }
                free(copy);
            }
        } else if (strcmp(a, "--rounds") == 0) {
            NEED();
            o->rounds = (int)parse_long(a, next, 1, MAX_ROUNDS);
        } else if (strcmp(a, "--split") == 0) {
            o->split = 1;
        } else if (strcmp(a, "--counts") == 0) {
            NEED();
            char *copy = strdup(next), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->ncounts == 16)
                    die("--counts: at most 16");
                o->counts[o->ncounts++] = (uint64_t)parse_long(a, tok, 1, 1L << 40);
            }
            free(copy);
        } else if (strcmp(a, "--keys") == 0) {
            NEED();
            o->nkeys = (uint64_t)parse_long(a, next, 1, 10000000);
        } else if (strcmp(a, "--pushpull") == 0) {
            o->pushpull = 1;
        } else if (strcmp(a, "--dup") == 0) {
            o->dup = 1;
        } else if (strcmp(a, "--edge-keys") == 0) {
            o->edge_keys = 1;
        } else if (strcmp(a, "--slow-rank") == 0) {
            NEED();
            o->slow_rank = (int)parse_long(a, next, 0, 1 << 16);
        } else if (strcmp(a, "--pipeline") == 0) {
            o->pipeline = 1;
        } else if (strcmp(a, "--threads") == 0) {
            NEED();
            o->threads = (int)parse_long(a, next, 1, MAX_THREADS);
        } else if (strcmp(a, "--stores") == 0) {
            NEED();
            o->stores = (int)parse_long(a, next, 1, MAX_THREADS);
        } else if (strcmp(a, "--pause-file") == 0) {
            NEED();
            o->pause_file = next;
        } else if (strcmp(a, "--block") == 0) {
            NEED();
            o->block = next;
        } else if (strcmp(a, "--callbacks") == 0) {
            o->callbacks = 1;
        } else if (strcmp(a, "--left") == 0) {
            o->left = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            die("unknown option %s\n%s", a, usage_text);
        } else {
            if (npos == 0)
                o->errname = a;
            else if (npos == 1)
                o->word = a;
            else
                die("unexpected argument %s", a);
            npos++;
        }
#undef NEED
    }
}

/* ---- a store and its identity ---- */

typedef struct wctx {
    const opts *o;
    kvs_store *s;
    int rank, W, S;
    char who[48];
    int failed;
} wctx;

/* Create a store and check rank / sizes against the environment. */
static int open_store(wctx *c, const opts *o, const char *type, int store_idx)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    snprintf(c->who, sizeof c->who, "worker id=%s", env_or("DMLC_WORKER_ID", "-"));
    int rc = kvs_create(type, &c->s);
    if (rc != 0) {
        say(c->who, "kvs_create(\"%s\") failed: %s (%s): %s", type, kvs_errname(rc), kvs_strerror(rc),
            kvs_last_error());
        return -1;
    }
    c->rank = kvs_rank(c->s);
    c->W = kvs_num_workers(c->s);
    c->S = kvs_num_servers(c->s);
    if (o->stores > 1)
        snprintf(c->who, sizeof c->who, "worker %d (store %d)", c->rank, store_idx);
    else
        snprintf(c->who, sizeof c->who, "worker %d", c->rank);
    say(c->who, "created %s store: rank %d of %d workers, %d servers, local rank %d of %d",
        type, c->rank, c->W, c->S, kvs_local_rank(c->s), kvs_local_size(c->s));
    if (kvs_local_size(c->s) < 1 || kvs_local_rank(c->s) < 0 ||
        kvs_local_rank(c->s) >= kvs_local_size(c->s) || kvs_local_size(c->s) > c->W) {
        say(c->who, "BAD local rank %d / local size %d", kvs_local_rank(c->s),
            kvs_local_size(c->s));
        c->failed = 1;
    }
    if (c->W < 1 || c->rank < 0 || c->rank >= c->W) {
        say(c->who, "BAD rank %d / num_workers %d", c->rank, c->W);
        c->failed = 1;
    }
    if (strcmp(type, "local") != 0) {
        int ew = atoi(env_or("DMLC_NUM_WORKER", "0")), es = atoi(env_or("DMLC_NUM_SERVER", "0"));
        if (c->W != ew || c->S != es) {
            say(c->who, "BAD sizes: kvs_num_workers=%d kvs_num_servers=%d, env says %d / %d", c->W, c->S,
                ew, es);
            c->failed = 1;
        }
        char name[64], text[32];
        snprintf(name, sizeof name, "rank-%d", c->rank);
        snprintf(text, sizeof text, "%d\n", (int)getpid());
        int w = write_test_file(name, text, 1);
        if (w == -EEXIST) {
            say(c->who, "BAD rank %d: another worker of this job has the same rank", c->rank);
            c->failed = 1;
        }
    } else if (c->W != 1 || c->rank != 0) {
        say(c->who, "BAD local store: rank %d of %d workers (expected 0 of 1)", c->rank, c->W);
        c->failed = 1;
    }
    return 0;
}

/* KVS_TEST_METRICS=1: write "<bytes sent> <bytes received>" so far (to and
 * from the servers, every data path, from kvs_metrics) to
 * $KVS_TEST_DIR/<what>-<rank>: "init-bytes" once the keys are initialised
 * and checked, "bytes" at the end. */
static void write_bytes(wctx *c, const char *what)
{
    const char *dir = getenv("KVS_TEST_DIR");
    if (dir == NULL || getenv("KVS_TEST_METRICS") == NULL)
        return;
    /* the text grows while the job runs (counters gain digits, series
     * appear): room for more than the last call asked for */
    char *text = NULL;
    int whole = 0;
    int need = kvs_metrics(c->s, NULL, 0);
    for (int tries = 0; need > 0 && !whole && tries < 8; tries++) {
        size_t cap = (size_t)need + 4096;
        free(text);
        text = xmalloc(cap);
        int n = kvs_metrics(c->s, text, cap);
        whole = n >= 0 && (size_t)n < cap;
        need = n;
    }
    if (!whole) {
        say(c->who, "BAD kvs_metrics: %d (the text for %s)", need, what);
        c->failed = 1;
        free(text);
        return;
    }
    double sent = 0, recv = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        char *sp = strrchr(l, ' ');
        if (sp == NULL)
            continue;
        if (strstr(l, "peer=\"server ") == NULL)
            continue;
        if (strncmp(l, "kvs_sent_bytes_total{", 21) == 0)
            sent += atof(sp + 1);
        else if (strncmp(l, "kvs_received_bytes_total{", 25) == 0)
            recv += atof(sp + 1);
    }
    free(text);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d", dir, what, c->rank);
    FILE *f = fopen(path, "w");
    if (f == NULL || fprintf(f, "%.0f %.0f\n", sent, recv) < 0 || fclose(f) != 0) {
        say(c->who, "BAD cannot write %s", path);
        c->failed = 1;
    }
}

static int close_store(wctx *c)
{
    int rc;
    write_bytes(c, "bytes");
    rc = kvs_close(c->s);
    c->s = NULL;
    if (report(c->who, "kvs_close", rc))
        c->failed = 1;
    return c->failed;
}

/* ---- the key set of `sum` ---- */

typedef struct keyspec {
    uint64_t key;
    kvs_dtype dtype;
    uint64_t count;
} keyspec;

static int make_keys(const opts *o, keyspec *ks)
{
    uint64_t counts[16];
    int nc = 0;
    if (o->ncounts) {
        memcpy(counts, o->counts, sizeof counts);
        nc = o->ncounts;
    } else {
        counts[nc++] = 1;
        counts[nc++] = 7;
        if (o->bound > 8)
            counts[nc++] = o->bound - 1; /* largest that lives on one server */
        if (o->split) {
            counts[nc++] = o->bound;         /* smallest split key */
            counts[nc++] = o->bound + 1;     /* not divisible by 2 */
            counts[nc++] = 2 * o->bound + 3; /* not divisible by 2 or 3 */
        }
    }
    int n = 0;
    for (int d = 0; d < o->ndtypes; d++)
        for (int j = 0; j < nc && n < MAX_KEYS; j++) {
            /* Keys far apart and some above 2^32, so they land on various servers. */
            uint64_t key = 17 + (uint64_t)o->dtypes[d] * 64 + (uint64_t)j * 5;
            if (j % 2)
                key += 1ull << 40;
            ks[n].key = key;
            ks[n].dtype = o->dtypes[d];
            ks[n].count = counts[j];
            n++;
        }
    if (o->edge_keys && n >= 2) {
        ks[0].key = 0;
        ks[1].key = UINT64_MAX;
    }
    return n;
}

/* One thread's share of the keys of a store: rounds of push+pull. */
typedef struct job {
    wctx *c;
    const keyspec *ks;
    int nk;
    int tid;
    int failed;
} job;

/* kvs_on_complete's calls, counted; the first error and its text kept. */
typedef struct completions {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls, err;
    uint64_t err_key;
    char text[512];
} completions;

static void on_complete(uint64_t key, int err, void *arg)
{
    completions *cp = arg;
    pthread_mutex_lock(&cp->mu);
    if (err != 0 && cp->err == 0) {
        cp->err = err;
        cp->err_key = key;
        snprintf(cp->text, sizeof cp->text, "%s", kvs_last_error());
    }
    cp->calls++;
    pthread_cond_broadcast(&cp->cv);
    pthread_mutex_unlock(&cp->mu);
}

/* Register a callback for each of keys[0..nk) and wait (at most timeout_s)
 * for all of them; 0, the first callback error, or KVS_ETIMEDOUT.  text:
 * the message that came with the error. */
static int wait_callbacks(kvs_store *s, const uint64_t *keys, int nk, double timeout_s,
                          char *text, size_t len)
{
    completions cp = {.calls = 0};
    int registered = 0, rc = 0;
    pthread_mutex_init(&cp.mu, NULL);
    pthread_cond_init(&cp.cv, NULL);
    text[0] = '\0';
    for (int k = 0; k < nk; k++) {
        rc = kvs_on_complete(s, keys[k], on_complete, &cp);
        if (rc != 0) {
            snprintf(text, len, "kvs_on_complete(key %" PRIu64 "): %s", keys[k], kvs_last_error());
            break;
        }
        registered++;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)timeout_s;
    pthread_mutex_lock(&cp.mu);
    while (cp.calls < registered)
        if (pthread_cond_timedwait(&cp.cv, &cp.mu, &dl) != 0)
            break;
    int late = cp.calls < registered;
    if (rc == 0 && late) {
        rc = KVS_ETIMEDOUT;
        snprintf(text, len, "%d of %d callbacks within %.0f s", cp.calls, registered, timeout_s);
    } else if (rc == 0 && cp.err) {
        rc = cp.err;
        snprintf(text, len, "%s", cp.text);
    }
    pthread_mutex_unlock(&cp.mu);
    if (late) /* cp must outlive the callbacks still registered */
        die("kvs_on_complete: callbacks missing after %.0f s", timeout_s);
    pthread_mutex_destroy(&cp.mu);
    pthread_cond_destroy(&cp.cv);
    return rc;
}

/* Wait for this round's operations: key by key, or all at once. */
static int wait_keys(job *j, const uint64_t *keys, int nk, int per_key, int round, const char *what)
{
    int bad = 0;
    char call[96];
    if (per_key && j->c->o->callbacks) {
        char text[600];
        snprintf(call, sizeof call, "%s round %d: kvs_on_complete(%d keys)", what, round, nk);
        int rc = wait_callbacks(j->c->s, keys, nk, 120, text, sizeof text);
        if (rc != 0) {
            say(j->c->who, "%s: %s: %s", call, kvs_errname(rc), text);
            bad = 1;
        }
    } else if (per_key) {
        for (int k = 0; k < nk; k++) {
            snprintf(call, sizeof call, "%s round %d: kvs_wait(key %" PRIu64 ")", what, round, keys[k]);
            bad |= report(j->c->who, call, kvs_wait(j->c->s, keys[k]));
        }
    } else {
        snprintf(call, sizeof call, "%s round %d: kvs_wait_all", what, round);
        bad |= report(j->c->who, call, kvs_wait_all(j->c->s));
    }
    return bad;
}

static void *run_rounds(void *arg)
{
    job *j = arg;
    wctx *c = j->c;
    const opts *o = c->o;
    int nslots = o->dup ? 2 : 1, R = o->rounds, nk = j->nk;
    int n = nk * nslots;
    uint64_t keys[MAX_KEYS * MAX_SLOTS];
    kvs_array *vals = xmalloc(sizeof *vals * (size_t)(n * R));
    kvs_array *outs = xmalloc(sizeof *outs * (size_t)(n * R));
    void **owned = xmalloc(sizeof *owned * (size_t)(2 * n * R));
    int nowned = 0;
    char call[128];
    expect e = {EXPECT_ROUND, 0, c->W, nslots};

    /* Slot-major order: key0 key1 ... key0 key1 ..., so repeats are apart. */
    for (int s = 0; s < nslots; s++)
        for (int k = 0; k < nk; k++)
            keys[s * nk + k] = j->ks[k].key;

    for (int r = 0; r < R; r++) {
        kvs_array *v = vals + (size_t)r * (size_t)n, *out = outs + (size_t)r * (size_t)n;
        for (int s = 0; s < nslots; s++)
            for (int k = 0; k < nk; k++) {
                const keyspec *ks = &j->ks[k];
                void *buf = new_buf(ks->dtype, ks->count);
                fill(ks->dtype, buf, ks->count, c->rank, ks->key, r, s);
                owned[nowned++] = buf;
                v[s * nk + k] = arr(buf, ks->count, ks->dtype);
                /* pushpull: every other key's output aliases its input. */
                if (o->pushpull && k % 2 == 1) {
                    out[s * nk + k] = v[s * nk + k];
                } else {
                    void *ob = new_buf(ks->dtype, ks->count);
                    owned[nowned++] = ob;
                    out[s * nk + k] = arr(ob, ks->count, ks->dtype);
                }
            }
        int rc;
        if (c->rank == o->slow_rank)
            nap_ms(100); /* the others' pulls must wait for this push */
        if (o->pushpull) {
            rc = kvs_pushpull(c->s, (size_t)n, keys, v, out, r);
            snprintf(call, sizeof call, "round %d: kvs_pushpull(%d keys)", r, n);
            j->failed |= report(c->who, call, rc);
        } else {
            rc = kvs_push(c->s, (size_t)n, keys, v, r);
            snprintf(call, sizeof call, "round %d: kvs_push(%d keys)", r, n);
            j->failed |= report(c->who, call, rc);
            if (o->pipeline) {
                rc = kvs_pull(c->s, (size_t)n, keys, out, r);
                snprintf(call, sizeof call, "round %d: kvs_pull(%d keys)", r, n);
                j->failed |= report(c->who, call, rc);
            }
        }
        if (o->pipeline)
            continue;
        /* With several threads only kvs_wait(key): a kvs_wait_all would also
         * wait for the other threads' operations, whose rounds may need the
         * other workers' threads to get past their own waits: a deadlock of
         * the test, not of the library. */
        int single = o->threads == 1;
        j->failed |= wait_keys(j, keys, nk, !single || r % 2 == 0, r, o->pushpull ? "pushpull" : "push");
        if (!o->pushpull) {
            rc = kvs_pull(c->s, (size_t)n, keys, out, r);
            snprintf(call, sizeof call, "round %d: kvs_pull(%d keys)", r, n);
            j->failed |= report(c->who, call, rc);
            j->failed |= wait_keys(j, keys, nk, !single || r % 2 == 1, r, "pull");
        }
        e.round = r;
        for (int i = 0; i < n; i++) {
            const keyspec *ks = &j->ks[i % nk];
            snprintf(call, sizeof call, "%s%s", o->pushpull ? "pushpull" : "pull",
                     i >= nk ? " (2nd copy)" : "");
            if (verify(c->who, call, ks->key, ks->dtype, ks->count, out[i].data, &e))
                j->failed = 1;
        }
        for (int i = 0; i < nowned; i++)
            free(owned[i]);
        nowned = 0;
        if (r == 0 && o->pause_file && j->tid == 0) {
            char name[64];
            id_file_name("paused", c->rank, name, sizeof name);
            write_test_file(name, "paused\n", 0);
            say(c->who, "paused after round 0; waiting for file %s", o->pause_file);
            if (!wait_test_file(o->pause_file, 120)) {
                say(c->who, "file %s did not appear within 120 s", o->pause_file);
                j->failed = 1;
            }
        }
    }
    if (o->pipeline) {
        if (o->threads == 1)
            j->failed |= report(c->who, "pipeline: kvs_wait_all", kvs_wait_all(c->s));
        else
            j->failed |= wait_keys(j, keys, nk, 1, R - 1, "pipeline");
        for (int r = 0; r < R; r++) {
            e.round = r;
            for (int i = 0; i < n; i++) {
                const keyspec *ks = &j->ks[i % nk];
                if (verify(c->who, o->pushpull ? "pipelined pushpull" : "pipelined pull", ks->key,
                           ks->dtype, ks->count, outs[(size_t)r * (size_t)n + (size_t)i].data, &e))
                    j->failed = 1;
            }
        }
        for (int i = 0; i < nowned; i++)
            free(owned[i]);
    }
    free(vals);
    free(outs);
    free(owned);
    return NULL;
}

/* kvs_init every key, check that a pull returns rank 0's values. */
static int init_and_check(wctx *c, const keyspec *ks, int nk)
{
    uint64_t keys[MAX_KEYS * MAX_SLOTS];
    kvs_array v[MAX_KEYS], out[MAX_KEYS * MAX_SLOTS];
    int failed = 0, nslots = c->o->dup ? 2 : 1;
    for (int k = 0; k < nk; k++) {
        keys[k] = ks[k].key;
        void *buf = new_buf(ks[k].dtype, ks[k].count);
        /* Only rank 0's data counts; the others pass different values. */
        fill(ks[k].dtype, buf, ks[k].count, c->rank == 0 ? INIT_W : INIT_W + c->rank, ks[k].key, 0, 0);
        v[k] = arr(buf, ks[k].count, ks[k].dtype);
    }
    failed |= report(c->who, "kvs_init", kvs_init(c->s, (size_t)nk, keys, v));
    for (int k = 0; k < nk; k++)
        free(v[k].data);
    if (failed)
        return 1;
    for (int s = 0; s < nslots; s++)
        for (int k = 0; k < nk; k++) {
            keys[s * nk + k] = ks[k].key;
            out[s * nk + k] = arr(new_buf(ks[k].dtype, ks[k].count), ks[k].count, ks[k].dtype);
        }
    failed |= report(c->who, "pull after init", kvs_pull(c->s, (size_t)(nk * nslots), keys, out, 0));
    failed |= report(c->who, "pull after init: kvs_wait_all", kvs_wait_all(c->s));
    expect e = {EXPECT_INIT, -1, c->W, 1};
    for (int i = 0; i < nk * nslots; i++) {
        const keyspec *k = &ks[i % nk];
        if (!failed && verify(c->who, "pull after init", k->key, k->dtype, k->count, out[i].data, &e))
            failed = 1;
        free(out[i].data);
    }
    write_bytes(c, "init-bytes");
    return failed;
}

typedef struct store_arg {
    const opts *o;
    int idx;
    int failed;
} store_arg;

static void *sum_store(void *arg)
{
    store_arg *a = arg;
    const opts *o = a->o;
    wctx c;
    keyspec ks[MAX_KEYS];
    int nk = make_keys(o, ks);
    int dist = strcmp(o->type, "local") != 0;
    if (open_store(&c, o, o->type, a->idx) != 0) {
        a->failed = 1;
        return NULL;
    }
    c.failed |= init_and_check(&c, ks, nk);
    if (!c.failed) {
        int T = o->threads < nk ? o->threads : nk;
        job jobs[MAX_THREADS];
        keyspec share[MAX_THREADS][MAX_KEYS];
        pthread_t th[MAX_THREADS];
        for (int t = 0; t < T; t++) {
            jobs[t] = (job){&c, share[t], 0, t, 0};
            for (int k = t; k < nk; k += T)
                share[t][jobs[t].nk++] = ks[k];
        }
        if (T == 1) {
            run_rounds(&jobs[0]);
        } else {
            for (int t = 0; t < T; t++)
                if (pthread_create(&th[t], NULL, run_rounds, &jobs[t]) != 0)
                    die("pthread_create failed");
            for (int t = 0; t < T; t++)
                pthread_join(th[t], NULL);
        }
        for (int t = 0; t < T; t++)
            c.failed |= jobs[t].failed;
    }
    if (dist)
        c.failed |= report(c.who, "final kvs_barrier", kvs_barrier(c.s));
    int failed = close_store(&c);
    say(c.who, "sum: %s", failed ? "FAILED" : "all values exact");
    a->failed = failed;
    return NULL;
}

static int scenario_sum(const opts *o)
{
    store_arg args[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int failed = 0;
    if (o->stores == 1) {
        args[0] = (store_arg){o, 0, 0};
        sum_store(&args[0]);
        return args[0].failed;
    }
    for (int i = 0; i < o->stores; i++) {
        args[i] = (store_arg){o, i, 0};
        if (pthread_create(&th[i], NULL, sum_store, &args[i]) != 0)
            die("pthread_create failed");
    }
    for (int i = 0; i < o->stores; i++) {
        pthread_join(th[i], NULL);
        failed |= args[i].failed;
    }
    return failed;
}

/* ---- many keys in one call ---- */

/* Key i of `many`: sizes from 1 element to past the direct-copy and fusion
 * thresholds (70001 elements), or the --counts in turn, with --split every
 * 97th key split over the servers; dtypes cycle through --dtype. */
static void many_key(const opts *o, uint64_t i, keyspec *k)
{
    static const uint64_t counts[] = {1, 2, 3, 7, 16, 33, 100, 257, 1000, 4097, 17000, 70001};
    k->key = 3 + i * 7919;
    k->dtype = o->dtypes[i % (uint64_t)o->ndtypes];
    k->count = counts[i % (sizeof counts / sizeof counts[0])];
    if (o->nkeys > 2000) /* huge key counts: keep the round small */
        k->count = counts[i % 7];
    if (o->ncounts > 0) /* --counts: these sizes in turn */
        k->count = o->counts[i % (uint64_t)o->ncounts];
    if (o->split && i % 97 == 5)
        k->count = o->bound + 3 + i % 2;
}

/* init, then --rounds rounds of one push+pull (or pushpull) call with all
 * --keys keys (with --dup every 10th key twice), each waited for with
 * kvs_wait of a few keys and kvs_wait_all, every element checked. */
static int scenario_many(const opts *o)
{
    wctx c;
    uint64_t nk = o->nkeys ? o->nkeys : 1000, ndup = o->dup ? (nk + 9) / 10 : 0, n = nk + ndup;
    keyspec *ks = xmalloc(sizeof *ks * (size_t)nk);
    uint64_t *keys = xmalloc(sizeof *keys * (size_t)n);
    kvs_array *v = xmalloc(sizeof *v * (size_t)n), *out = xmalloc(sizeof *out * (size_t)n);
    char call[128];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    for (uint64_t i = 0; i < nk; i++) {
        many_key(o, i, &ks[i]);
        keys[i] = ks[i].key;
        v[i] = arr(new_buf(ks[i].dtype, ks[i].count), ks[i].count, ks[i].dtype);
        out[i] = arr(new_buf(ks[i].dtype, ks[i].count), ks[i].count, ks[i].dtype);
        fill(ks[i].dtype, v[i].data, ks[i].count, c.rank == 0 ? INIT_W : INIT_W + c.rank,
             ks[i].key, 0, 0);
    }
    for (uint64_t d = 0; d < ndup; d++) { /* the second copies: slot 1 */
        const keyspec *k = &ks[d * 10];
        keys[nk + d] = k->key;
        v[nk + d] = arr(new_buf(k->dtype, k->count), k->count, k->dtype);
        out[nk + d] = arr(new_buf(k->dtype, k->count), k->count, k->dtype);
    }
    c.failed |= report(c.who, "kvs_init", kvs_init(c.s, (size_t)nk, keys, v));
    expect e = {EXPECT_ROUND, 0, c.W, 1};
    for (int r = 0; r < o->rounds && !c.failed; r++) {
        for (uint64_t i = 0; i < n; i++) {
            const keyspec *k = &ks[i < nk ? i : (i - nk) * 10];
            fill(k->dtype, v[i].data, k->count, c.rank, k->key, r, i < nk ? 0 : 1);
        }
        if (o->pushpull) {
            snprintf(call, sizeof call, "round %d: kvs_pushpull(%llu keys)", r,
                     (unsigned long long)n);
            c.failed |= report(c.who, call, kvs_pushpull(c.s, (size_t)n, keys, v, out, r));
        } else {
            snprintf(call, sizeof call, "round %d: kvs_push(%llu keys)", r,
                     (unsigned long long)n);
            c.failed |= report(c.who, call, kvs_push(c.s, (size_t)n, keys, v, r));
            snprintf(call, sizeof call, "round %d: kvs_pull(%llu keys)", r,
                     (unsigned long long)n);
            c.failed |= report(c.who, call, kvs_pull(c.s, (size_t)n, keys, out, r));
        }
        for (uint64_t i = 0; i < nk; i += nk / 7 + 1) {
            snprintf(call, sizeof call, "round %d: kvs_wait(key %llu)", r,
                     (unsigned long long)keys[i]);
            c.failed |= report(c.who, call, kvs_wait(c.s, keys[i]));
        }
        c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
        e.round = r;
        for (uint64_t i = 0; i < n && !c.failed; i++) {
            const keyspec *k = &ks[i < nk ? i : (i - nk) * 10];
            e.nslots = ndup && (i >= nk || i % 10 == 0) ? 2 : 1;
            if (verify(c.who, i < nk ? "many" : "many (2nd copy)", k->key, k->dtype, k->count,
                       out[i].data, &e))
                c.failed = 1;
        }
    }
    for (uint64_t i = 0; i < n; i++) {
        free(v[i].data);
        free(out[i].data);
    }
    free(ks);
    free(keys);
    free(v);
    free(out);
    c.failed |= report(c.who, "final kvs_barrier", kvs_barrier(c.s));
    int failed = close_store(&c);
    say(c.who, "many: %llu keys: %s", (unsigned long long)nk,
        failed ? "FAILED" : "all values exact");
    return failed;
}

/* ---- async ---- */

static int scenario_async(const opts *o)
{
    wctx c;
    if (open_store(&c, o, "dist_async", 0) != 0)
        return 1;
    keyspec ks[3] = {{5, KVS_FLOAT32, 7}, {6, KVS_FLOAT64, 2 * o->bound + 1}, {7, KVS_INT32, 3}};
    uint64_t keys[3];
    kvs_array v[3], out[3];
    for (int k = 0; k < 3; k++) {
        keys[k] = ks[k].key;
        void *z = new_buf(ks[k].dtype, ks[k].count);
        memset(z, 0, (size_t)ks[k].count * kvs_dtype_size(ks[k].dtype));
        v[k] = arr(z, ks[k].count, ks[k].dtype);
    }
    c.failed |= report(c.who, "kvs_init (zeros)", kvs_init(c.s, 3, keys, v));
    for (int r = 0; r < o->rounds && !c.failed; r++) {
        for (int k = 0; k < 3; k++)
            fill(ks[k].dtype, v[k].data, ks[k].count, c.rank, ks[k].key, r, 0);
        c.failed |= report(c.who, "kvs_push", kvs_push(c.s, 3, keys, v, 0));
        c.failed |= report(c.who, "kvs_wait_all after push", kvs_wait_all(c.s));
    }
    c.failed |= report(c.who, "kvs_barrier after the pushes", kvs_barrier(c.s));
    for (int k = 0; k < 3; k++)
        out[k] = arr(new_buf(ks[k].dtype, ks[k].count), ks[k].count, ks[k].dtype);
    c.failed |= report(c.who, "kvs_pull", kvs_pull(c.s, 3, keys, out, 0));
    c.failed |= report(c.who, "kvs_wait_all after pull", kvs_wait_all(c.s));
    expect e = {EXPECT_ALL_ROUNDS, o->rounds - 1, c.W, 1};
    for (int k = 0; k < 3; k++) {
        if (!c.failed && verify(c.who, "async total", ks[k].key, ks[k].dtype, ks[k].count, out[k].data, &e))
            c.failed = 1;
        free(out[k].data);
        free(v[k].data);
    }
    c.failed |= report(c.who, "final kvs_barrier", kvs_barrier(c.s));
    int failed = close_store(&c);
    say(c.who, "async: %s", failed ? "FAILED" : "totals exact");
    return failed;
}

/* ---- ahead: a worker pushing rounds far ahead meets the server's bound ----
 * One server, two workers, keys 5 (A) and 6 (B, 1000 floats).  Worker 0
 * pushes B --rounds times at once (round 0 waits for worker 1; later rounds
 * are kept by the server until then, up to its KVS_MAX_QUEUED_* bound), then
 * pulls A (answered after the server handled every push of B: one
 * connection, in order) and enters a barrier.  Worker 1 pushes B 3 times
 * after the barrier.  With the test's bounds rounds 1 and 2 fit: rounds 0-2
 * complete (worker 1 pulls 2.0 everywhere) and worker 0's wait on B returns
 * KVS_EFULL naming the bound. */
static int scenario_ahead(const opts *o)
{
    wctx c;
    uint64_t a = 5, b = 6;
    enum { N = 1000 };
    float *va = calloc(1, sizeof(float)), *vb = calloc(N, sizeof(float)), *out = calloc(N, 4);
    if (open_store(&c, o, "dist_sync", 0) != 0 || va == NULL || vb == NULL || out == NULL)
        return 1;
    kvs_array xa = arr(va, 1, KVS_FLOAT32), xb = arr(vb, N, KVS_FLOAT32);
    kvs_array oa = arr(out, 1, KVS_FLOAT32), ob = arr(out, N, KVS_FLOAT32);
    c.failed |= report(c.who, "kvs_init A", kvs_init(c.s, 1, &a, &xa));
    c.failed |= report(c.who, "kvs_init B", kvs_init(c.s, 1, &b, &xb));
    for (int i = 0; i < N; i++)
        vb[i] = 1.0f;
    if (c.rank == 0) {
        for (int r = 0; r < o->rounds && !c.failed; r++)
            c.failed |= report(c.who, "kvs_push B", kvs_push(c.s, 1, &b, &xb, 0));
        c.failed |= report(c.who, "kvs_pull A", kvs_pull(c.s, 1, &a, &oa, 0));
        c.failed |= report(c.who, "kvs_wait A", kvs_wait(c.s, a));
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        int rc = kvs_wait(c.s, b);
        say(c.who, "kvs_wait B returned %s: %s", kvs_errname(rc), kvs_last_error());
        if (rc != KVS_EFULL || strstr(kvs_last_error(), "KVS_MAX_QUEUED") == NULL) {
            say(c.who, "expected KVS_EFULL naming KVS_MAX_QUEUED_*");
            c.failed = 1;
        }
    } else {
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        for (int r = 0; r < 3 && !c.failed; r++)
            c.failed |= report(c.who, "kvs_push B", kvs_push(c.s, 1, &b, &xb, 0));
        c.failed |= report(c.who, "kvs_pull B", kvs_pull(c.s, 1, &b, &ob, 0));
        c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
        for (int i = 0; i < N && !c.failed; i++)
            if (out[i] != 2.0f) {
                say(c.who, "B[%d] = %g after round 2, expected 2", i, out[i]);
                c.failed = 1;
            }
    }
    free(va);
    free(vb);
    free(out);
    int failed = close_store(&c);
    say(c.who, "ahead: %s", failed ? "FAILED" : "bound met, sums exact");
    return failed;
}

/* ---- keys-bound: worker 0 inits more keys than the server holds ----
 * One server.  Worker 0 inits keys 1..N (8 float32 each) one call at a time
 * until one is answered KVS_EFULL naming KVS_MAX_KEY* (the test's bound lets
 * fewer than N in; none may fail otherwise), then every worker inits the
 * keys that were created and pushes and pulls them 2 rounds: the sums are
 * exact, the refused key stays refused.  --keys N (default 64). */
static int scenario_keys_bound(const opts *o)
{
    wctx c;
    enum { n = 8 };
    int nk = o->nkeys > 0 ? (int)o->nkeys : 64, made = 0;
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    float v[n], out[n];
    kvs_array a = arr(v, n, KVS_FLOAT32), ao = arr(out, n, KVS_FLOAT32);
    if (c.rank == 0) {
        for (int k = 1; k <= nk && !c.failed; k++) {
            uint64_t key = (uint64_t)k;
            for (int i = 0; i < n; i++)
                v[i] = (float)(k * 10 + i);
            int rc = kvs_init(c.s, 1, &key, &a);
            if (rc == 0) {
                made++;
                continue;
            }
            say(c.who, "kvs_init of key %d returned %s: %s", k, kvs_errname(rc),
                kvs_last_error());
            if (rc != KVS_EFULL || strstr(kvs_last_error(), "KVS_MAX_KEY") == NULL) {
                say(c.who, "expected KVS_EFULL naming KVS_MAX_KEYS / KVS_MAX_KEY_BYTES");
                c.failed = 1;
            }
            break;
        }
        if (made == nk) {
            say(c.who, "all %d keys were created: no bound met", nk);
            c.failed = 1;
        }
        uint64_t key = (uint64_t)made + 1;
        int rc = kvs_init(c.s, 1, &key, &a); /* still refused */
        if (rc != KVS_EFULL) {
            say(c.who, "second init of key %llu returned %s, expected KVS_EFULL",
                (unsigned long long)key, kvs_errname(rc));
            c.failed = 1;
        }
        char buf[32];
        snprintf(buf, sizeof buf, "%d\n", made);
        write_test_file("keys-made", buf, 0);
    } else {
        if (!wait_test_file("keys-made", 120)) {
            say(c.who, "file keys-made never came");
            c.failed = 1;
        } else {
            char path[4096];
            FILE *f = test_path("keys-made", path, sizeof path) ? fopen(path, "r") : NULL;
            if (f == NULL || fscanf(f, "%d", &made) != 1)
                c.failed = 1;
            if (f)
                fclose(f);
        }
        for (int k = 1; k <= made && !c.failed; k++) {
            uint64_t key = (uint64_t)k;
            c.failed |= report(c.who, "kvs_init", kvs_init(c.s, 1, &key, &a));
        }
    }
    for (int round = 0; round < 2 && !c.failed; round++)
        for (int k = 1; k <= made && !c.failed; k++) {
            uint64_t key = (uint64_t)k;
            for (int i = 0; i < n; i++)
                v[i] = (float)(round * 1000 + k * 10 + i + c.rank);
            if (report(c.who, "kvs_push", kvs_push(c.s, 1, &key, &a, 0)) ||
                report(c.who, "kvs_pull", kvs_pull(c.s, 1, &key, &ao, 0)) ||
                report(c.who, "kvs_wait_all", kvs_wait_all(c.s))) {
                c.failed = 1;
                break;
            }
            for (int i = 0; i < n; i++) {
                float want = 0;
                for (int w = 0; w < c.W; w++)
                    want += (float)(round * 1000 + k * 10 + i + w);
                if (out[i] != want) {
                    say(c.who, "round %d key %d element %d: got %g, expected %g", round, k, i,
                        out[i], want);
                    c.failed = 1;
                }
            }
        }
    if (!c.failed)
        say(c.who, "keys-bound: %d keys exact, the next one refused", made);
    return close_store(&c) || c.failed;
}

/* ---- barrier ---- */

static int scenario_barrier(const opts *o)
{
    wctx c;
    char name[64];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    if (getenv("KVS_TEST_DIR") == NULL)
        die("barrier needs KVS_TEST_DIR");
    for (int r = 0; r < o->rounds; r++) {
        /* The last rank arrives late, so the others really wait for it. */
        if (c.rank == c.W - 1)
            nap_ms(300);
        snprintf(name, sizeof name, "barrier-%d-rank-%d", r, c.rank);
        write_test_file(name, "here\n", 0);
        double t0 = now_s();
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        say(c.who, "barrier %d took %.3f s", r, now_s() - t0);
        for (int w = 0; w < c.W; w++) {
            snprintf(name, sizeof name, "barrier-%d-rank-%d", r, w);
            if (!test_file_exists(name)) {
                say(c.who, "BARRIER %d returned before rank %d entered it (no file %s)", r, w, name);
                c.failed = 1;
            }
        }
    }
    int failed = close_store(&c);
    say(c.who, "barrier: %s", failed ? "FAILED" : "ok");
    return failed;
}

/* kvs_broadcast, kvs_is_capable, kvs_num_dead_node. */
static int scenario_api(const opts *o)
{
    wctx c;
    const char *type = o->type ? o->type : "dist_sync";
    int dist = strcmp(type, "local") != 0 && strcmp(type, "device") != 0;
    if (open_store(&c, o, type, 0) != 0)
        return 1;
    /* two keys, the second on every server (split by BIGARRAY_BOUND in the
     * harness's jobs); each worker offers its own values, rank 0's win */
    enum { NK = 2 };
    uint64_t keys[NK] = {301, 302}, counts[NK] = {7, 300001};
    kvs_array vals[NK], outs[NK];
    for (int k = 0; k < NK; k++) {
        float *v = new_buf(KVS_FLOAT32, counts[k]), *out = new_buf(KVS_FLOAT32, counts[k]);
        for (uint64_t i = 0; i < counts[k]; i++) {
            v[i] = (float)(c.rank * 1000 + k * 100) + (float)(i % 97);
            out[i] = -1.0f;
        }
        vals[k] = arr(v, counts[k], KVS_FLOAT32);
        outs[k] = arr(out, counts[k], KVS_FLOAT32);
    }
    c.failed |= report(c.who, "kvs_broadcast", kvs_broadcast(c.s, NK, keys, vals, outs, 0));
    c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
    for (int k = 0; k < NK && !c.failed; k++) {
        const float *out = outs[k].data;
        for (uint64_t i = 0; i < counts[k]; i++) {
            float want = (float)(k * 100) + (float)(i % 97); /* rank 0's value */
            if (out[i] != want) {
                say(c.who, "BROADCAST key %llu element %llu: got %g, want %g",
                    (unsigned long long)keys[k], (unsigned long long)i, out[i], want);
                c.failed = 1;
                break;
            }
        }
    }
    /* a broadcast of a key that exists already is kvs_init's error path:
     * a different count is KVS_ESHAPE and nothing is pulled */
    kvs_array bad = arr(vals[0].data, counts[0] - 1, KVS_FLOAT32);
    int rc = kvs_broadcast(c.s, 1, keys, &bad, &bad, 0);
    if (rc == 0)
        rc = kvs_wait_all(c.s);
    if (dist && rc != KVS_ESHAPE) {
        say(c.who, "kvs_broadcast with a changed count returned %s, want KVS_ESHAPE",
            kvs_errname(rc));
        c.failed = 1;
    }
    rc = kvs_broadcast(c.s, 1, keys, NULL, outs, 0);
    if (rc != KVS_EINVAL) {
        say(c.who, "kvs_broadcast(vals NULL) returned %s, want KVS_EINVAL", kvs_errname(rc));
        c.failed = 1;
    }

    int dev = strstr(type, "device") != NULL || strcmp(type, "nccl") == 0;
    const struct { int cap, want; } caps[] = {
        {KVS_CAP_OPTIMIZER, strncmp(type, "dist", 4) == 0}, {KVS_CAP_PUSHPULL, 1},
        {KVS_CAP_BROADCAST, 1}, {KVS_CAP_DEVICE_STORE, dev},
        {KVS_CAP_ASYNC, strstr(type, "async") != NULL},
        {KVS_CAP_COMPRESSION, strncmp(type, "dist", 4) == 0 && !dev},
        {KVS_CAP_ROW_SPARSE, strncmp(type, "dist", 4) == 0}};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        rc = kvs_is_capable(c.s, caps[i].cap);
        if (rc != caps[i].want) {
            say(c.who, "kvs_is_capable(%d) on '%s' returned %d, want %d", caps[i].cap, type, rc,
                caps[i].want);
            c.failed = 1;
        }
    }
    const int bad_caps[] = {0, -1, KVS_CAP_ROW_SPARSE + 1, 1 << 30};
    for (size_t i = 0; i < sizeof bad_caps / sizeof bad_caps[0]; i++)
        if ((rc = kvs_is_capable(c.s, bad_caps[i])) != KVS_EINVAL ||
            strstr(kvs_last_error(), "capability") == NULL) {
            say(c.who, "kvs_is_capable(%d) returned %d (%s), want KVS_EINVAL", bad_caps[i], rc,
                kvs_last_error());
            c.failed = 1;
        }
    if (kvs_is_capable(NULL, KVS_CAP_PUSHPULL) != KVS_EINVAL ||
        kvs_num_dead_node(NULL, KVS_GROUP_SERVER) != KVS_EINVAL) {
        say(c.who, "a NULL store was not KVS_EINVAL");
        c.failed = 1;
    }
    const int masks[] = {KVS_GROUP_SERVER, KVS_GROUP_WORKER, KVS_GROUP_SERVER | KVS_GROUP_WORKER};
    for (size_t i = 0; i < 3; i++)
        if ((rc = kvs_num_dead_node(c.s, masks[i])) != 0) {
            say(c.who, "kvs_num_dead_node(%d) = %d in a healthy job", masks[i], rc);
            c.failed = 1;
        }
    const int bad_masks[] = {0, 1, 8, 3, -1};
    for (size_t i = 0; i < sizeof bad_masks / sizeof bad_masks[0]; i++)
        if ((rc = kvs_num_dead_node(c.s, bad_masks[i])) != KVS_EINVAL ||
            strstr(kvs_last_error(), "mask") == NULL) {
            say(c.who, "kvs_num_dead_node(%d) returned %d (%s), want KVS_EINVAL", bad_masks[i],
                rc, kvs_last_error());
            c.failed = 1;
        }
    for (int k = 0; k < NK; k++) {
        free(vals[k].data);
        free(outs[k].data);
    }
    int failed = close_store(&c);
    say(c.who, "api: %s", failed ? "FAILED" : "ok");
    return failed;
}

/* ---- errors ---- */

/* Run a call that must fail with want, either at once or at the wait on key
 * (when the call queued it).  Returns 1 on a problem. */
static int expect_err(wctx *c, const char *what, int rc_call, uint64_t key, int want)
{
    int rc = rc_call, where = 0;
    if (rc == 0) {
        rc = kvs_wait(c->s, key);
        where = 1;
    }
    const char *msg = kvs_last_error();
    if (rc != want) {
        say(c->who, "%s: expected %s, got %s from %s (%s)", what, kvs_errname(want), kvs_errname(rc),
            where ? "kvs_wait" : "the call", msg);
        return 1;
    }
    if (msg == NULL || msg[0] == '\0') {
        say(c->who, "%s: %s but kvs_last_error() is empty", what, kvs_errname(rc));
        return 1;
    }
    say(c->who, "%s: %s from %s, as expected: %s", what, kvs_errname(rc), where ? "kvs_wait" : "the call",
        msg);
    return 0;
}

static int scenario_errors(const opts *o)
{
    int failed = 0;
    kvs_store *s = NULL;
    int rc = kvs_create("bogus", &s);
    if (rc != KVS_EINVAL) {
        say("worker", "kvs_create(\"bogus\") returned %s, expected KVS_EINVAL", kvs_errname(rc));
        failed = 1;
        if (rc == 0)
            kvs_close(s);
    }
    rc = kvs_create(NULL, &s);
    if (rc != KVS_EINVAL) {
        say("worker", "kvs_create(NULL) returned %s, expected KVS_EINVAL", kvs_errname(rc));
        failed = 1;
    }
    rc = kvs_create("dist_sync", NULL);
    if (rc != KVS_EINVAL) {
        say("worker", "kvs_create(\"dist_sync\", NULL) returned %s, expected KVS_EINVAL", kvs_errname(rc));
        failed = 1;
    }
    if ((rc = kvs_close(NULL)) != 0) {
        say("worker", "kvs_close(NULL) returned %s, expected 0", kvs_errname(rc));
        failed = 1;
    }

    wctx c;
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    c.failed |= failed;

    /* MXNet's name is learning_rate: 'lr' is refused, naming the word */
    rc = kvs_set_optimizer(c.s, "sgd lr=0.1");
    if (rc != KVS_EINVAL || !strstr(kvs_last_error(), "lr=0.1")) {
        say(c.who, "kvs_set_optimizer: expected KVS_EINVAL naming 'lr=0.1', got %s: %s",
            kvs_errname(rc), kvs_last_error());
        c.failed = 1;
    }

    const uint64_t A = 11, B = 12, C = 13, U = 987654321;
    const uint64_t nB = 2 * o->bound + 1;
    keyspec ks[3] = {{A, KVS_FLOAT32, 10}, {B, KVS_INT64, nB}, {C, KVS_FLOAT16, 5}};
    uint64_t keys[3] = {A, B, C};
    kvs_array v[3], out[3];
    for (int k = 0; k < 3; k++) {
        v[k] = arr(new_buf(ks[k].dtype, ks[k].count), ks[k].count, ks[k].dtype);
        fill(ks[k].dtype, v[k].data, ks[k].count, INIT_W, ks[k].key, 0, 0);
        out[k] = arr(new_buf(ks[k].dtype, ks[k].count), ks[k].count, ks[k].dtype);
    }
    if (report(c.who, "kvs_init", kvs_init(c.s, 3, keys, v))) {
        close_store(&c);
        return 1;
    }

    /* A key repeated in one kvs_init takes its first value. */
    {
        const uint64_t D = 14, dk[2] = {D, D};
        void *d1 = new_buf(KVS_FLOAT32, 6), *d2 = new_buf(KVS_FLOAT32, 6), *dout = new_buf(KVS_FLOAT32, 6);
        fill(KVS_FLOAT32, d1, 6, INIT_W, D, 0, 0);
        fill(KVS_FLOAT32, d2, 6, INIT_W + 7, D, 0, 0);
        kvs_array dv[2] = {arr(d1, 6, KVS_FLOAT32), arr(d2, 6, KVS_FLOAT32)}, dov = arr(dout, 6, KVS_FLOAT32);
        expect ei = {EXPECT_INIT, -1, c.W, 1};
        if (!report(c.who, "kvs_init with a key repeated", kvs_init(c.s, 2, dk, dv)) &&
            !report(c.who, "pull of the repeated init key", kvs_pull(c.s, 1, &D, &dov, 0)) &&
            !report(c.who, "kvs_wait(repeated init key)", kvs_wait(c.s, D))) {
            if (verify(c.who, "init with a repeated key (the first value wins)", D, KVS_FLOAT32, 6, dout, &ei))
                c.failed = 1;
        } else {
            c.failed = 1;
        }
        free(d1);
        free(d2);
        free(dout);
    }

    /* A pull of a key nobody initialised. */
    void *ubuf = new_buf(KVS_FLOAT32, 10);
    kvs_array u = arr(ubuf, 10, KVS_FLOAT32);
    c.failed |= expect_err(&c, "pull of a key never initialised", kvs_pull(c.s, 1, &U, &u, 0), U, KVS_ENOKEY);

    /* Pushes whose shape differs from the init. */
    void *small = new_buf(KVS_FLOAT32, 5), *dbl = new_buf(KVS_FLOAT64, 10);
    void *bshort = new_buf(KVS_INT64, nB - 1), *bi32 = new_buf(KVS_INT32, nB);
    memset(small, 0, 5 * 4);
    memset(dbl, 0, 10 * 8);
    memset(bshort, 0, (size_t)(nB - 1) * 8);
    memset(bi32, 0, (size_t)nB * 4);
    kvs_array bad;
    bad = arr(small, 5, KVS_FLOAT32);
    c.failed |= expect_err(&c, "push of 5 elements to a 10-element key", kvs_push(c.s, 1, &A, &bad, 0), A,
                           KVS_ESHAPE);
    bad = arr(dbl, 10, KVS_FLOAT64);
    c.failed |= expect_err(&c, "push of float64 to a float32 key", kvs_push(c.s, 1, &A, &bad, 0), A,
                           KVS_ESHAPE);
    bad = arr(bshort, nB - 1, KVS_INT64);
    c.failed |= expect_err(&c, "push of count-1 elements to a split key", kvs_push(c.s, 1, &B, &bad, 0), B,
                           KVS_ESHAPE);
    bad = arr(bi32, nB, KVS_INT32);
    c.failed |= expect_err(&c, "push of int32 to an int64 split key", kvs_push(c.s, 1, &B, &bad, 0), B,
                           KVS_ESHAPE);
    bad = arr(small, 5, KVS_FLOAT32);
    c.failed |= expect_err(&c, "pushpull of 5 elements to a 10-element key",
                           kvs_pushpull(c.s, 1, &A, &bad, &bad, 0), A, KVS_ESHAPE);

    /* Invalid arguments. */
    rc = kvs_push(c.s, 1, NULL, v, 0);
    if (rc != KVS_EINVAL) {
        say(c.who, "kvs_push(keys=NULL) returned %s, expected KVS_EINVAL", kvs_errname(rc));
        c.failed = 1;
    }
    kvs_array nulldata = arr(NULL, 10, KVS_FLOAT32);
    rc = kvs_push(c.s, 1, &A, &nulldata, 0);
    if (rc != KVS_EINVAL) {
        say(c.who, "kvs_push(data=NULL, count=10) returned %s, expected KVS_EINVAL", kvs_errname(rc));
        c.failed = 1;
        if (rc == 0)
            kvs_wait(c.s, A);
    }

    /* Every error was reported once: nothing is left for wait_all. */
    c.failed |= report(c.who, "kvs_wait_all after the reported errors", kvs_wait_all(c.s));

    /* The job goes on: two good rounds on all three keys. */
    expect e = {EXPECT_ROUND, 0, c.W, 1};
    for (int r = 0; r < 2 && !c.failed; r++) {
        for (int k = 0; k < 3; k++) {
            fill(ks[k].dtype, v[k].data, ks[k].count, c.rank, ks[k].key, r, 0);
            memset(out[k].data, 0xff, (size_t)ks[k].count * kvs_dtype_size(ks[k].dtype));
        }
        if (r == 0) {
            c.failed |= report(c.who, "good push after the errors", kvs_push(c.s, 3, keys, v, 0));
            c.failed |= report(c.who, "good pull after the errors", kvs_pull(c.s, 3, keys, out, 0));
        } else {
            c.failed |= report(c.who, "good pushpull after the errors", kvs_pushpull(c.s, 3, keys, v, out, 0));
        }
        c.failed |= report(c.who, "kvs_wait_all after the good round", kvs_wait_all(c.s));
        e.round = r;
        for (int k = 0; k < 3 && !c.failed; k++)
            if (verify(c.who, "after errors", ks[k].key, ks[k].dtype, ks[k].count, out[k].data, &e))
                c.failed = 1;
    }
    /* Still unknown, still an error; and a good pull right after works. */
    c.failed |= expect_err(&c, "second pull of a key never initialised", kvs_pull(c.s, 1, &U, &u, 0), U,
                           KVS_ENOKEY);
    memset(out[0].data, 0xff, 10 * 4);
    c.failed |= report(c.who, "pull after the second ENOKEY", kvs_pull(c.s, 1, &A, &out[0], 0));
    c.failed |= report(c.who, "kvs_wait(A)", kvs_wait(c.s, A));
    e.round = 1;
    if (!c.failed && verify(c.who, "pull after the second ENOKEY", A, KVS_FLOAT32, 10, out[0].data, &e))
        c.failed = 1;

    c.failed |= report(c.who, "final kvs_barrier", kvs_barrier(c.s));
    for (int k = 0; k < 3; k++) {
        free(v[k].data);
        free(out[k].data);
    }
    free(ubuf);
    free(small);
    free(dbl);
    free(bshort);
    free(bi32);
    int failed_all = close_store(&c);
    say(c.who, "errors: %s", failed_all ? "FAILED" : "ok");
    return failed_all;
}

/* ---- dead peers ---- */

/* Keys of the dead-peer scenarios: P lives on one server, Q on all. */
/* peer-dead --keys N: floats per big key (two parts of 32 KiB with
 * MXNET_KVSTORE_BIGARRAY_BOUND=1000 and two servers: above DP_CMA_MIN). */
#define PEER_BIG 16384

static int peer_setup(wctx *c, const opts *o, uint64_t *P, uint64_t *Q, kvs_array *pv, kvs_array *qv)
{
    *P = 21;
    *Q = 22;
    uint64_t nQ = 2 * o->bound + 1;
    *pv = arr(new_buf(KVS_FLOAT32, 10), 10, KVS_FLOAT32);
    *qv = arr(new_buf(KVS_FLOAT32, nQ), nQ, KVS_FLOAT32);
    memset(pv->data, 0, 10 * 4);
    memset(qv->data, 0, (size_t)nQ * 4);
    uint64_t keys[2] = {*P, *Q};
    kvs_array v[2] = {*pv, *qv};
    if (report(c->who, "kvs_init", kvs_init(c->s, 2, keys, v)))
        return 1;
    if (o->nkeys > 0) { /* --keys N: keys 100.. of PEER_BIG floats, by reference on one host */
        float *z = new_buf(KVS_FLOAT32, PEER_BIG);
        memset(z, 0, PEER_BIG * sizeof *z);
        for (uint64_t k = 0; k < o->nkeys; k++) {
            uint64_t key = 100 + k;
            kvs_array a = arr(z, PEER_BIG, KVS_FLOAT32);
            if (report(c->who, "kvs_init of a big key", kvs_init(c->s, 1, &key, &a))) {
                free(z);
                return 1;
            }
        }
        free(z);
    }
    if (report(c->who, "kvs_barrier before the kill", kvs_barrier(c->s)))
        return 1;
    char name[64], text[32];
    id_file_name("ready", c->rank, name, sizeof name);
    snprintf(text, sizeof text, "%d\n", c->rank);
    write_test_file(name, text, 0);
    say(c->who, "ready (rank %d)", c->rank);
    return 0;
}

static int scenario_victim(const opts *o)
{
    wctx c;
    uint64_t P, Q;
    kvs_array pv, qv;
    if (open_store(&c, o, o->type, 0) != 0 || peer_setup(&c, o, &P, &Q, &pv, &qv) != 0)
        return 1;
    say(c.who, "victim: waiting to be killed");
    for (int i = 0; i < 120 * 100; i++)
        nap_ms(10);
    say(c.who, "victim: not killed within 120 s");
    return 3;
}

/* 1 if text contains the decimal number n as a token of its own. */
static int has_number(const char *text, long n)
{
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9' || (p > text && p[-1] >= '0' && p[-1] <= '9'))
            continue;
        char *end;
        long v = strtol(p, &end, 10);
        if (v == n)
            return 1;
        p = end - 1;
    }
    return 0;
}

/* Check a KVS_EPEERDEAD message against file 'expect-dead' ("worker 2"). */
static int check_dead_name(wctx *c, const char *msg)
{
    char path[4096], role[32];
    int rank;
    if (test_path("expect-dead", path, sizeof path) == NULL)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        say(c->who, "KVS_EPEERDEAD before the harness killed anything (no file expect-dead): %s", msg);
        return 1;
    }
    int n = fscanf(f, "%31s %d", role, &rank);
    fclose(f);
    if (n < 1)
        die("bad expect-dead file");
    if (n == 1)
        rank = -1; /* "scheduler": a role without a rank */
    if (strcasestr(msg, role) == NULL || (rank >= 0 && !has_number(msg, rank))) {
        say(c->who, "kvs_last_error() does not name the dead node \"%s %d\": \"%s\"", role, rank, msg);
        return 1;
    }
    return 0;
}

/* kvs_num_dead_node after a death: the role in 'expect-dead' counts 1
 * once the scheduler's notice has arrived (it may trail the failure the
 * broken link reported: wait for it, 30 s at most), the other counts 0. */
static int check_dead_count(wctx *c)
{
    char path[4096], role[32] = "";
    if (test_path("expect-dead", path, sizeof path) == NULL)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%31s", role) != 1)
        die("bad expect-dead file");
    fclose(f);
    int ws = strcmp(role, "server") == 0, ww = strcmp(role, "worker") == 0;
    double end = now_s() + 30;
    int ns, nw;
    while ((ns = kvs_num_dead_node(c->s, KVS_GROUP_SERVER)) != ws ||
           (nw = kvs_num_dead_node(c->s, KVS_GROUP_WORKER)) != ww) {
        if (now_s() > end || ns > ws)
            break;
        nap_ms(20);
    }
    ns = kvs_num_dead_node(c->s, KVS_GROUP_SERVER);
    nw = kvs_num_dead_node(c->s, KVS_GROUP_WORKER);
    int both = kvs_num_dead_node(c->s, KVS_GROUP_SERVER | KVS_GROUP_WORKER);
    say(c->who, "kvs_num_dead_node: servers %d, workers %d, both %d", ns, nw, both);
    if (ns != ws || nw != ww || both != ws + ww) {
        say(c->who, "DEAD COUNT: want servers %d, workers %d (%s died)", ws, ww, role);
        return 1;
    }
    return 0;
}

/* peer-dead --block pulls: a push and a pull of each of the o->nkeys big
 * keys (the pulls wait for the round, which the other worker never
 * pushes), then kvs_wait of each key: every wait must fail with the same
 * error; the worst wait is said.  Returns that error (0 if none failed). */
static int peer_pulls(wctx *c, const opts *o, char *msg, size_t msglen)
{
    uint64_t n = o->nkeys;
    float *in = new_buf(KVS_FLOAT32, n * PEER_BIG), *out = new_buf(KVS_FLOAT32, n * PEER_BIG);
    int first = 0, rc = 0;
    double worst = 0, t0 = now_s();
    memset(in, 0, n * PEER_BIG * sizeof *in);
    for (uint64_t k = 0; k < n && rc == 0; k++) {
        uint64_t key = 100 + k;
        kvs_array a = arr(in + k * PEER_BIG, PEER_BIG, KVS_FLOAT32);
        kvs_array b = arr(out + k * PEER_BIG, PEER_BIG, KVS_FLOAT32);
        rc = kvs_push(c->s, 1, &key, &a, 0);
        if (rc == 0)
            rc = kvs_pull(c->s, 1, &key, &b, 0);
    }
    if (rc != 0) {
        snprintf(msg, msglen, "%s", kvs_last_error());
        kvs_wait_all(c->s);
        first = rc;
    }
    say(c->who, "%llu pushes and pulls queued; waiting for each", (unsigned long long)n);
    for (uint64_t k = 0; k < n && first == 0; k++) {
        uint64_t key = 100 + k;
        int r = kvs_wait(c->s, key);
        double took = now_s() - t0;
        if (took > worst)
            worst = took;
        if (k == 0) {
            first = r;
            snprintf(msg, msglen, "%s", kvs_last_error());
        } else if (r != first) {
            say(c->who, "kvs_wait of key %llu returned %s, key 100 %s", (unsigned long long)key,
                kvs_errname(r), kvs_errname(first));
            first = first ? first : r;
            c->failed = 1;
        }
    }
    say(c->who, "the %llu waits returned within %.2f s", (unsigned long long)n, worst);
    free(in);
    free(out);
    return first;
}

static int scenario_peer_dead(const opts *o)
{
    wctx c;
    uint64_t P, Q;
    kvs_array pv, qv;
    if (open_store(&c, o, o->type, 0) != 0 || peer_setup(&c, o, &P, &Q, &pv, &qv) != 0)
        return 1;
    uint64_t keys[2] = {P, Q};
    kvs_array v[2] = {pv, qv};
    kvs_array out[2] = {arr(new_buf(KVS_FLOAT32, pv.count), pv.count, KVS_FLOAT32),
                        arr(new_buf(KVS_FLOAT32, qv.count), qv.count, KVS_FLOAT32)};
    int rc;
    const char *how;
    char msg[1024];
    if (strcmp(o->block, "late") == 0) {
        if (!wait_test_file("killed", 120)) {
            say(c.who, "file 'killed' did not appear within 120 s");
            return 1;
        }
        how = "a call after the kill (push+pull of a key on every server, kvs_wait_all)";
    } else if (strcmp(o->block, "barrier") == 0) {
        how = "kvs_barrier, blocked";
    } else if (strcmp(o->block, "callback") == 0) {
        how = "push+pull, completions through kvs_on_complete";
    } else if (strcmp(o->block, "pulls") == 0) {
        how = "push+pull of every big key (--keys), each waited for with kvs_wait";
    } else {
        how = "push+pull, blocked in kvs_wait_all";
    }
    double t0 = now_s();
    say(c.who, "entering %s", how);
    msg[0] = '\0';
    if (strcmp(o->block, "barrier") == 0) {
        rc = kvs_barrier(c.s);
        snprintf(msg, sizeof msg, "%s", kvs_last_error());
    } else if (strcmp(o->block, "pulls") == 0) {
        rc = peer_pulls(&c, o, msg, sizeof msg);
    } else {
        rc = kvs_push(c.s, 2, keys, v, 0);
        if (rc == 0)
            rc = kvs_pull(c.s, 2, keys, out, 0);
        if (rc != 0) {
            snprintf(msg, sizeof msg, "%s", kvs_last_error());
            kvs_wait_all(c.s); /* the arrays must not be freed while queued */
        } else if (strcmp(o->block, "callback") == 0) {
            rc = wait_callbacks(c.s, keys, 2, 120, msg, sizeof msg);
        } else {
            rc = kvs_wait_all(c.s);
            snprintf(msg, sizeof msg, "%s", kvs_last_error());
        }
    }
    say(c.who, "%s returned %s after %.2f s: %s", how, kvs_errname(rc), now_s() - t0, msg);
    if (rc != KVS_EPEERDEAD) {
        say(c.who, "expected KVS_EPEERDEAD from %s", how);
        c.failed = 1;
    } else {
        c.failed |= check_dead_name(&c, msg);
    }
    if (rc == KVS_EPEERDEAD && !o->left)
        c.failed |= check_dead_count(&c);

    /* A later call fails the same way, at once or at its wait. */
    t0 = now_s();
    rc = kvs_push(c.s, 1, &P, &pv, 0);
    if (rc == 0)
        rc = kvs_wait(c.s, P);
    snprintf(msg, sizeof msg, "%s", kvs_last_error());
    say(c.who, "a later push returned %s after %.2f s: %s", kvs_errname(rc), now_s() - t0, msg);
    if (rc != KVS_EPEERDEAD) {
        say(c.who, "expected KVS_EPEERDEAD from a push after the death was reported");
        c.failed = 1;
    } else {
        c.failed |= check_dead_name(&c, msg);
    }
    /* The job is dead: every later call says so, even the waits of nothing
     * and kvs_close (a departure fails only the rounds it left open). */
    int want = o->left ? 0 : KVS_EPEERDEAD;
    rc = kvs_wait(c.s, P);
    snprintf(msg, sizeof msg, "%s", kvs_last_error());
    say(c.who, "kvs_wait afterwards returned %s: %s", kvs_errname(rc), msg);
    if (rc != want) {
        say(c.who, "expected %s from kvs_wait after the failure", kvs_errname(want));
        c.failed = 1;
    } else if (want) {
        c.failed |= check_dead_name(&c, msg);
    }
    rc = kvs_wait_all(c.s);
    snprintf(msg, sizeof msg, "%s", kvs_last_error());
    say(c.who, "kvs_wait_all afterwards returned %s: %s", kvs_errname(rc), msg);
    if (rc != want) {
        say(c.who, "expected %s from kvs_wait_all after the failure", kvs_errname(want));
        c.failed = 1;
    } else if (want) {
        c.failed |= check_dead_name(&c, msg);
    }
    t0 = now_s();
    rc = kvs_close(c.s);
    snprintf(msg, sizeof msg, "%s", kvs_last_error());
    say(c.who, "kvs_close returned %s after %.2f s: %s", kvs_errname(rc), now_s() - t0, msg);
    if (rc != want) {
        say(c.who, "expected %s from kvs_close after the failure", kvs_errname(want));
        c.failed = 1;
    } else if (want) {
        c.failed |= check_dead_name(&c, msg);
    }
    free(out[0].data);
    free(out[1].data);
    free(pv.data);
    free(qv.data);
    say(c.who, "peer-dead: %s", c.failed ? "FAILED" : "ok");
    return c.failed;
}

static int scenario_leave(const opts *o)
{
    wctx c;
    uint64_t P, Q;
    kvs_array pv, qv;
    if (open_store(&c, o, "dist_sync", 0) != 0 || peer_setup(&c, o, &P, &Q, &pv, &qv) != 0)
        return 1;
    if (!wait_test_file("go", 120)) {
        say(c.who, "file 'go' did not appear within 120 s");
        return 1;
    }
    int rc = kvs_close(c.s);
    say(c.who, "left the job: kvs_close returned %s", kvs_errname(rc));
    free(pv.data);
    free(qv.data);
    return rc != 0;
}

/* Worker 0 calls kvs_close before any kvs_init; every other worker's
 * kvs_init (which starts from worker 0's values) fails with KVS_EPEERDEAD
 * naming worker 0, within 10 s, instead of waiting forever. */
static int scenario_early_leave(const opts *o)
{
    wctx c;
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    if (c.rank == 0) {
        int rc = kvs_close(c.s);
        say(c.who, "left before kvs_init: kvs_close returned %s", kvs_errname(rc));
        return rc != 0;
    }
    uint64_t key = 7;
    float v[4] = {1, 2, 3, 4};
    kvs_array a = arr(v, 4, KVS_FLOAT32);
    double t0 = now_s();
    int rc = kvs_init(c.s, 1, &key, &a);
    double dt = now_s() - t0;
    say(c.who, "kvs_init returned %s after %.2f s: %s", kvs_errname(rc), dt, kvs_last_error());
    if (rc != KVS_EPEERDEAD || strstr(kvs_last_error(), "worker 0") == NULL || dt > 10) {
        say(c.who, "expected KVS_EPEERDEAD naming worker 0 within 10 s");
        c.failed = 1;
    }
    kvs_close(c.s);
    say(c.who, "early-leave: %s", c.failed ? "FAILED" : "ok");
    return c.failed;
}

/* One call that must fail with KVS_ETOOBIG at once. */
static int expect_too_big(wctx *c, const char *what, int rc, double t0)
{
    double dt = now_s() - t0;
    say(c->who, "%s returned %s after %.3f s: %s", what, kvs_errname(rc), dt, kvs_last_error());
    if (rc != KVS_ETOOBIG || dt > 1.0) {
        say(c->who, "expected KVS_ETOOBIG within 1 s from %s", what);
        return 1;
    }
    return 0;
}

static int scenario_too_big(const opts *o)
{
    wctx c;
    float small[4] = {1, 2, 3, 4}, out[4];
    if (open_store(&c, o, o->type, 0) != 0)
        return 1;
    /* the data pointers are never read: the sizes fail first */
    uint64_t key = 5;
    kvs_array huge = arr(small, 1ULL << 40, KVS_FLOAT32);       /* 4 TiB */
    kvs_array over = arr(small, 1ULL << 62, KVS_FLOAT64);       /* 2^65 bytes */
    double t0 = now_s();
    c.failed |= expect_too_big(&c, "kvs_init of 2^40 float32", kvs_init(c.s, 1, &key, &huge), t0);
    t0 = now_s();
    c.failed |= expect_too_big(&c, "kvs_init of 2^62 float64", kvs_init(c.s, 1, &key, &over), t0);
    t0 = now_s();
    c.failed |= expect_too_big(&c, "kvs_push of 2^40 float32", kvs_push(c.s, 1, &key, &huge, 0), t0);
    t0 = now_s();
    c.failed |= expect_too_big(&c, "kvs_pull of 2^62 float64", kvs_pull(c.s, 1, &key, &over, 0), t0);
    /* the store still works */
    kvs_array v = arr(small, 4, KVS_FLOAT32), ov = arr(out, 4, KVS_FLOAT32);
    int rc = kvs_init(c.s, 1, &key, &v);
    if (rc == 0)
        rc = kvs_pull(c.s, 1, &key, &ov, 0);
    if (rc == 0)
        rc = kvs_wait(c.s, key);
    if (report(c.who, "init+pull after the refusals", rc))
        c.failed = 1;
    else if (c.rank == 0 && memcmp(out, small, sizeof out) != 0) {
        say(c.who, "MISMATCH after the refusals: got %g %g %g %g", out[0], out[1], out[2], out[3]);
        c.failed = 1;
    }
    if (report(c.who, "kvs_close", kvs_close(c.s)))
        c.failed = 1;
    say(c.who, "too-big: %s", c.failed ? "FAILED" : "ok");
    return c.failed;
}

/* ---- a server out of memory answers ---- */

/* With --pause FILE: write paused-<rank>, then wait for FILE (the test
 * changes the server meanwhile).  0, or 1 when FILE never came. */
static int pause_for_test(wctx *c, const opts *o)
{
    char name[64];
    if (o->pause_file == NULL)
        return 0;
    id_file_name("paused", c->rank, name, sizeof name);
    write_test_file(name, "paused\n", 0);
    if (wait_test_file(o->pause_file, 120))
        return 0;
    say(c->who, "file %s never came", o->pause_file);
    return 1;
}

/* what (on the big key) returned rc: it must be KVS_ENOMEM naming memory;
 * then 3 rounds of the small key (v and out, n elements) stay exact. */
static void enomem_then_exact(wctx *c, const char *what, int rc, uint64_t small, float *v,
                              float *out, uint64_t n)
{
    kvs_array a = arr(v, n, KVS_FLOAT32), ao = arr(out, n, KVS_FLOAT32);
    say(c->who, "%s returned %s: %s", what, kvs_errname(rc), kvs_last_error());
    if (rc != KVS_ENOMEM || strstr(kvs_last_error(), "memory") == NULL) {
        say(c->who, "expected KVS_ENOMEM naming memory");
        c->failed = 1;
    }
    for (int round = 0; round < 3 && !c->failed; round++) {
        for (uint64_t i = 0; i < n; i++)
            v[i] = (float)(round * 100 + (int)i);
        if (report(c->who, "kvs_push", kvs_push(c->s, 1, &small, &a, 0)) ||
            report(c->who, "kvs_pull", kvs_pull(c->s, 1, &small, &ao, 0)) ||
            report(c->who, "kvs_wait_all", kvs_wait_all(c->s))) {
            c->failed = 1;
            break;
        }
        for (uint64_t i = 0; i < n; i++)
            if (out[i] != v[i] * (float)c->W) {
                say(c->who, "round %d element %llu: got %g, expected %g", round,
                    (unsigned long long)i, out[i], v[i] * (float)c->W);
                c->failed = 1;
            }
    }
}

/* The server cannot hold key 22's value: its init is answered KVS_ENOMEM,
 * and a small key stays exact. */
static int scenario_enomem(const opts *o)
{
    wctx c;
    const uint64_t small = 21, big = 22, n = 8;
    uint64_t nbig = o->ncounts ? o->counts[0] : (64u << 20);
    char what[64];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    float v[8], out[8];
    for (uint64_t i = 0; i < n; i++)
        v[i] = (float)(i + 1);
    kvs_array a = arr(v, n, KVS_FLOAT32);
    if (report(c.who, "kvs_init (small key)", kvs_init(c.s, 1, &small, &a)) ||
        pause_for_test(&c, o)) { /* the test waits for the direct-copy proof */
        close_store(&c);
        return 1;
    }
    float *bigbuf = calloc(nbig, sizeof *bigbuf); /* never touched: no resident pages */
    if (bigbuf == NULL)
        die("cannot allocate %llu float32", (unsigned long long)nbig);
    kvs_array ab = arr(bigbuf, nbig, KVS_FLOAT32);
    int rc = kvs_init(c.s, 1, &big, &ab);
    free(bigbuf);
    snprintf(what, sizeof what, "kvs_init of %llu float32", (unsigned long long)nbig);
    enomem_then_exact(&c, what, rc, small, v, out, n);
    if (!c.failed)
        say(c.who, "enomem: KVS_ENOMEM answered, small key exact afterwards");
    return close_store(&c) || c.failed;
}

/* The server has room for key 22's value but not for a round buffer: init
 * works, every push of it is answered KVS_ENOMEM (by reference or through
 * the socket alike), and a small key stays exact. */
static int scenario_enomem_push(const opts *o)
{
    wctx c;
    const uint64_t small = 21, big = 22, n = 8;
    uint64_t nbig = o->ncounts ? o->counts[0] : (64u << 20);
    char what[64];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    float v[8], out[8];
    for (uint64_t i = 0; i < n; i++)
        v[i] = (float)(i + 1);
    kvs_array a = arr(v, n, KVS_FLOAT32);
    float *bigbuf = calloc(nbig, sizeof *bigbuf); /* never touched: no resident pages */
    if (bigbuf == NULL)
        die("cannot allocate %llu float32", (unsigned long long)nbig);
    kvs_array ab = arr(bigbuf, nbig, KVS_FLOAT32);
    if (report(c.who, "kvs_init (small key)", kvs_init(c.s, 1, &small, &a)) ||
        report(c.who, "kvs_init (big key)", kvs_init(c.s, 1, &big, &ab)) ||
        pause_for_test(&c, o)) { /* the test lowers the server's limit */
        free(bigbuf);
        close_store(&c);
        return 1;
    }
    /* a push and the pull of its round, as training does */
    int rc = kvs_push(c.s, 1, &big, &ab, 0);
    if (rc == 0)
        rc = kvs_pull(c.s, 1, &big, &ab, 0);
    if (rc == 0)
        rc = kvs_wait_all(c.s);
    free(bigbuf);
    snprintf(what, sizeof what, "kvs_push of %llu float32", (unsigned long long)nbig);
    enomem_then_exact(&c, what, rc, small, v, out, n);
    if (!c.failed)
        say(c.who, "enomem-push: KVS_ENOMEM answered, small key exact afterwards");
    return close_store(&c) || c.failed;
}

/* ---- kvs_create failures ---- */

static int scenario_create_error(const opts *o)
{
    kvs_store *s = NULL;
    if (o->errname == NULL)
        die("create-error needs ERRNAME");
    double t0 = now_s();
    int rc = kvs_create(o->type, &s);
    const char *msg = kvs_last_error();
    say("worker", "kvs_create(\"%s\") returned %s after %.2f s: %s", o->type, kvs_errname(rc), now_s() - t0,
        msg);
    if (rc == 0) {
        kvs_close(s);
        say("worker", "expected %s", o->errname);
        return 1;
    }
    if (strcmp(kvs_errname(rc), o->errname) != 0) {
        say("worker", "expected %s", o->errname);
        return 1;
    }
    if (o->word && strstr(msg, o->word) == NULL) {
        say("worker", "kvs_last_error() does not name %s", o->word);
        return 1;
    }
    return 0;
}

/* ---- self test of the helpers ---- */

/* ---- plain pulls in a local group ---- */

#define GP_KEYS 6

/* group-pulls: key k, element i of worker w's push in round r. */
static float gp_val(int w, int k, int r, uint64_t i)
{
    return (float)((w + 1) * (k + 1) + r + (int)(i % 7));
}

/* Check every element of key k's pulled value after round r of W workers. */
static int gp_check(wctx *c, const char *what, int k, int r, const float *got, uint64_t n)
{
    int bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        float want = (float)((k + 1) * c->W * (c->W + 1) / 2 + c->W * (r + (int)(i % 7)));
        if (got[i] != want && bad++ < MISMATCH_LINES)
            say(c->who, "MISMATCH %s: key %d round %d element %llu: got %g, want %g", what, k,
                r, (unsigned long long)i, (double)got[i], (double)want);
    }
    return bad != 0;
}

/* group-pulls [--rounds N] [--left]: GP_KEYS keys of several sizes (the
 * last split over the servers); each round every worker pushes every key
 * and waits, then pulls in a pattern of its own: rank 0 every key in one
 * call; rank 1 one key at a time in reverse order, key 0 twice in one call;
 * rank 2 only after a pause, and only the even keys in odd rounds; others
 * as rank 0.  Every pulled element is checked.  --left: then the last rank
 * closes its store and writes file 'left'; the others pull every key again
 * after that, and check. */
static int scenario_group_pulls(const opts *o)
{
    wctx c;
    uint64_t counts[GP_KEYS] = {1, 10, 1000, 5000, 70001, 2 * o->bound + 3};
    uint64_t keys[GP_KEYS];
    float *in[GP_KEYS], *out[GP_KEYS + 1];
    kvs_array iv[GP_KEYS], ov[GP_KEYS + 1];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    for (int k = 0; k < GP_KEYS; k++) {
        keys[k] = (uint64_t)k;
        in[k] = new_buf(KVS_FLOAT32, counts[k]);
        out[k] = new_buf(KVS_FLOAT32, counts[k]);
        memset(in[k], 0, counts[k] * sizeof(float));
        iv[k] = arr(in[k], counts[k], KVS_FLOAT32);
        ov[k] = arr(out[k], counts[k], KVS_FLOAT32);
    }
    out[GP_KEYS] = new_buf(KVS_FLOAT32, counts[0]);
    ov[GP_KEYS] = arr(out[GP_KEYS], counts[0], KVS_FLOAT32);
    c.failed |= report(c.who, "kvs_init", kvs_init(c.s, GP_KEYS, keys, iv));
    int r = 0;
    for (; r < o->rounds && !c.failed; r++) {
        for (int k = 0; k < GP_KEYS; k++)
            for (uint64_t i = 0; i < counts[k]; i++)
                in[k][i] = gp_val(c.rank, k, r, i);
        c.failed |= report(c.who, "kvs_push", kvs_push(c.s, GP_KEYS, keys, iv, 0));
        c.failed |= report(c.who, "kvs_wait_all after the push", kvs_wait_all(c.s));
        for (int k = 0; k < GP_KEYS + 1; k++)
            memset(out[k], 0xff, counts[k < GP_KEYS ? k : 0] * sizeof(float));
        int pulled[GP_KEYS] = {0};
        if (c.rank == 1) {
            for (int k = GP_KEYS - 1; k >= 0; k--) {
                uint64_t two[2] = {keys[k], keys[k]};
                kvs_array tv[2] = {ov[k], ov[k == 0 ? GP_KEYS : k]};
                c.failed |= report(c.who, "kvs_pull of one key",
                                   kvs_pull(c.s, k == 0 ? 2 : 1, two, tv, 0));
                pulled[k] = 1;
            }
        } else if (c.rank == 2) {
            nap_ms(50); /* late: the others' pulls are served first */
            for (int k = 0; k < GP_KEYS; k++)
                if (r % 2 == 0 || k % 2 == 0) {
                    c.failed |= report(c.who, "kvs_pull", kvs_pull(c.s, 1, &keys[k], &ov[k], 0));
                    pulled[k] = 1;
                }
        } else {
            c.failed |= report(c.who, "kvs_pull", kvs_pull(c.s, GP_KEYS, keys, ov, 0));
            for (int k = 0; k < GP_KEYS; k++)
                pulled[k] = 1;
        }
        c.failed |= report(c.who, "kvs_wait_all after the pulls", kvs_wait_all(c.s));
        for (int k = 0; k < GP_KEYS && !c.failed; k++)
            if (pulled[k])
                c.failed |= gp_check(&c, "pull", k, r, out[k], counts[k]);
        if (c.rank == 1 && !c.failed)
            c.failed |= gp_check(&c, "second output of a pull", 0, r, out[GP_KEYS], counts[0]);
    }
    if (!o->left && !c.failed) {
        /* a re-init replaces the values: a member's kept pull of the last
         * round (rank 2 skipped the odd keys in odd rounds) is not given */
        c.failed |= report(c.who, "kvs_barrier before the init", kvs_barrier(c.s));
        for (int k = 0; k < GP_KEYS; k++)
            for (uint64_t i = 0; i < counts[k]; i++)
                in[k][i] = (float)((k + 1) * 1000 + (int)(i % 5));
        c.failed |= report(c.who, "kvs_init again", kvs_init(c.s, GP_KEYS, keys, iv));
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        for (int k = 0; k < GP_KEYS; k++)
            memset(out[k], 0xff, counts[k] * sizeof(float));
        c.failed |= report(c.who, "kvs_pull after the init",
                           kvs_pull(c.s, GP_KEYS, keys, ov, 0));
        c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
        for (int k = 0; k < GP_KEYS && !c.failed; k++)
            for (uint64_t i = 0; i < counts[k]; i++)
                if (out[k][i] != in[k][i]) {
                    say(c.who, "MISMATCH pull after a re-init: key %d element %llu: got %g, "
                        "want %g", k, (unsigned long long)i, (double)out[k][i],
                        (double)in[k][i]);
                    c.failed = 1;
                    break;
                }
    }
    if (o->left && !c.failed) {
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        if (c.rank == c.W - 1) {
            c.failed |= report(c.who, "kvs_close", kvs_close(c.s));
            c.s = NULL;
            write_test_file("left", "1\n", 0);
        } else if (!wait_test_file("left", 60)) {
            say(c.who, "file 'left' did not appear within 60 s");
            c.failed = 1;
        } else {
            for (int k = 0; k < GP_KEYS; k++)
                memset(out[k], 0xff, counts[k] * sizeof(float));
            c.failed |= report(c.who, "kvs_pull after a member left",
                               kvs_pull(c.s, GP_KEYS, keys, ov, 0));
            c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
            for (int k = 0; k < GP_KEYS && !c.failed; k++)
                c.failed |= gp_check(&c, "pull after a member left", k, r - 1, out[k], counts[k]);
        }
    }
    if (c.s)
        c.failed |= report(c.who, "kvs_close", kvs_close(c.s));
    for (int k = 0; k < GP_KEYS; k++) {
        free(in[k]);
        free(out[k]);
    }
    free(out[GP_KEYS]);
    say(c.who, "group-pulls: %s", c.failed ? "FAILED" : "ok");
    return c.failed;
}

/* group-p3: GP3_LOW keys of 4 MiB, each pushpulled in its own call at
 * priority 0, then one key of 16 KiB at priority 100, per round; every sum
 * checked element by element; the high key must complete before half of
 * the low ones (completion order from kvs_on_complete). */
#define GP3_LOW 24
#define GP3_HIGH_KEY 1000

typedef struct gp3_order {
    _Atomic int next;
    int at[GP3_LOW + 1]; /* completion number of low key k; [GP3_LOW]: the high key */
} gp3_order;

typedef struct gp3_cb {
    gp3_order *ord;
    int slot;
} gp3_cb;

static void gp3_done(uint64_t key, int err, void *arg)
{
    gp3_cb *cb = arg;
    (void)key;
    (void)err; /* (the waits report it) */
    cb->ord->at[cb->slot] = atomic_fetch_add(&cb->ord->next, 1);
}

static float gp3_val(int rank, int k, int r, uint64_t i)
{
    return (float)((rank + 1) * 3 + k + r + (int)(i % 7));
}

static int scenario_group_p3(const opts *o)
{
    wctx c;
    enum { N = GP3_LOW + 1 };
    uint64_t keys[N], counts[N];
    float *in[N], *out[N];
    kvs_array iv[N], ov[N];
    gp3_cb cbs[N];
    if (open_store(&c, o, "dist_sync", 0) != 0)
        return 1;
    for (int k = 0; k < N; k++) {
        keys[k] = k < GP3_LOW ? (uint64_t)k : GP3_HIGH_KEY;
        counts[k] = k < GP3_LOW ? 1u << 20 : 4096;
        in[k] = new_buf(KVS_FLOAT32, counts[k]);
        out[k] = new_buf(KVS_FLOAT32, counts[k]);
        memset(in[k], 0, counts[k] * sizeof(float));
        iv[k] = arr(in[k], counts[k], KVS_FLOAT32);
        ov[k] = arr(out[k], counts[k], KVS_FLOAT32);
    }
    c.failed |= report(c.who, "kvs_init", kvs_init(c.s, N, keys, iv));
    c.failed |= report(c.who, "kvs_wait_all after the init", kvs_wait_all(c.s));
    int late = 0;
    static gp3_order ord; /* (outlives a failed round's late callbacks) */
    for (int r = 0; r < o->rounds && !c.failed; r++) {
        atomic_store(&ord.next, 0);
        for (int k = 0; k < N; k++) {
            for (uint64_t i = 0; i < counts[k]; i++)
                in[k][i] = gp3_val(c.rank, k, r, i);
            memset(out[k], 0xff, counts[k] * sizeof(float));
        }
        c.failed |= report(c.who, "kvs_barrier", kvs_barrier(c.s));
        for (int k = 0; k < N && !c.failed; k++) {
            c.failed |= report(c.who, "kvs_pushpull", kvs_pushpull(c.s, 1, &keys[k], &iv[k],
                                                                   &ov[k], k < GP3_LOW ? 0 : 100));
            cbs[k] = (gp3_cb){&ord, k};
            c.failed |= report(c.who, "kvs_on_complete",
                               kvs_on_complete(c.s, keys[k], gp3_done, &cbs[k]));
        }
        c.failed |= report(c.who, "kvs_wait_all", kvs_wait_all(c.s));
        /* every callback has run once its key is done; wait for the last */
        for (int spin = 0; spin < 10000 && atomic_load(&ord.next) < N; spin++)
            nap_ms(1);
        if (atomic_load(&ord.next) < N) {
            say(c.who, "round %d: %d of %d completion callbacks ran", r, atomic_load(&ord.next), N);
            c.failed = 1;
        }
        for (int k = 0; k < N && !c.failed; k++)
            for (uint64_t i = 0; i < counts[k]; i++) {
                float want = 0;
                for (int w = 0; w < c.W; w++)
                    want += gp3_val(w, k, r, i);
                if (out[k][i] != want) {
                    say(c.who, "MISMATCH round %d key %llu element %llu: got %g, want %g", r,
                        (unsigned long long)keys[k], (unsigned long long)i, (double)out[k][i],
                        (double)want);
                    c.failed = 1;
                    break;
                }
            }
        say(c.who, "round %d: the priority-100 key completed as number %d of %d", r,
            ord.at[GP3_LOW] + 1, N);
        late += ord.at[GP3_LOW] >= GP3_LOW / 2;
    }
    if (late > 0 && !c.failed) {
        say(c.who, "the priority-100 key completed after half of the priority-0 keys in %d "
            "round(s)", late);
        c.failed = 1;
    }
    if (c.s)
        c.failed |= report(c.who, "kvs_close", kvs_close(c.s));
    for (int k = 0; k < N; k++) {
        free(in[k]);
        free(out[k]);
    }
    say(c.who, "group-p3: %s", c.failed ? "FAILED" : "ok");
    return c.failed;
}

static int scenario_selftest(void)
{
    int bad = 0;
    static const struct {
        float f;
        uint16_t h, b;
    } known[] = {{0.0f, 0x0000, 0x0000},  {1.0f, 0x3c00, 0x3f80},    {-2.0f, 0xc000, 0xc000},
                 {0.5f, 0x3800, 0x3f00},  {65280.0f, 0x7bf8, 0x477f}, {-16.0f, 0xcc00, 0xc180},
                 {256.0f, 0x5c00, 0x4380}, {2048.0f, 0x6800, 0x4500}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (f32_to_f16(known[i].f) != known[i].h || f16_to_f32(known[i].h) != known[i].f) {
            say("selftest", "float16 of %g: got 0x%04x, expected 0x%04x", known[i].f, f32_to_f16(known[i].f),
                known[i].h);
            bad = 1;
        }
        if (f32_to_bf16(known[i].f) != known[i].b || bf16_to_f32(known[i].b) != known[i].f) {
            say("selftest", "bfloat16 of %g: got 0x%04x, expected 0x%04x", known[i].f,
                f32_to_bf16(known[i].f), known[i].b);
            bad = 1;
        }
    }
    for (int v = -2048; v <= 2048; v++)
        if (f16_to_f32(f32_to_f16((float)v)) != (float)v) {
            say("selftest", "float16 round trip of %d failed", v);
            bad = 1;
            break;
        }
    for (int v = -256; v <= 256; v++)
        if (bf16_to_f32(f32_to_bf16((float)v)) != (float)v) {
            say("selftest", "bfloat16 round trip of %d failed", v);
            bad = 1;
            break;
        }
    /* Rounding: 2049 is halfway between 2048 and 2050 in float16 -> even 2048;
     * 257 in bfloat16 -> 256; tiny values -> subnormals. */
    if (f16_to_f32(f32_to_f16(2049.0f)) != 2048.0f || bf16_to_f32(f32_to_bf16(257.0f)) != 256.0f ||
        f16_to_f32(f32_to_f16(ldexpf(1.0f, -24))) != ldexpf(1.0f, -24)) {
        say("selftest", "rounding of the half-precision helpers is wrong");
        bad = 1;
    }
    /* The extreme sums (4 workers x 2 copies x 16) survive every dtype. */
    for (int d = 0; d < KVS_NUM_DTYPES; d++) {
        double buf[1];
        if (!is_float((kvs_dtype)d))
            continue;
        double scale = (d == KVS_FLOAT32 || d == KVS_FLOAT64) ? 0.25 : 1.0;
        for (int sign = -1; sign <= 1; sign += 2) {
            val x = {sign * 128.0 * scale, 0}, y;
            put((kvs_dtype)d, buf, 0, x);
            y = get((kvs_dtype)d, buf, 0);
            if (y.f != x.f) {
                say("selftest", "%s cannot hold %g exactly", dname((kvs_dtype)d), x.f);
                bad = 1;
            }
        }
    }
    /* Values vary with every input and stay in [-16, 16]. */
    int seen[33] = {0};
    for (uint64_t i = 0; i < 10000; i++) {
        int64_t s = small_int((int)(i % 4), i / 4, i, (int)(i % 3), (int)(i % 2));
        if (s < -16 || s > 16) {
            say("selftest", "small_int out of range: %" PRId64, s);
            bad = 1;
            break;
        }
        seen[s + 16] = 1;
    }
    for (int i = 0; i < 33; i++)
        if (!seen[i]) {
            say("selftest", "small_int never produced %d", i - 16);
            bad = 1;
        }
    if (small_int(0, 1, 2, 0, 0) == small_int(1, 1, 2, 0, 0) && small_int(0, 1, 2, 0, 0) == small_int(2, 1, 2, 0, 0) &&
        small_int(0, 1, 2, 0, 0) == small_int(3, 1, 2, 0, 0)) {
        say("selftest", "small_int does not depend on the worker");
        bad = 1;
    }
    say("selftest", "%s", bad ? "FAILED" : "ok");
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *sc = argv[1];
    opts o;
    parse_opts(&o, argc - 2, argv + 2);
    if (strcmp(sc, "selftest") == 0)
        return scenario_selftest();
    if (strcmp(sc, "sum") == 0)
        return scenario_sum(&o);
    if (strcmp(sc, "ahead") == 0)
        return scenario_ahead(&o);
    if (strcmp(sc, "async") == 0)
        return scenario_async(&o);
    if (strcmp(sc, "keys-bound") == 0)
        return scenario_keys_bound(&o);
    if (strcmp(sc, "many") == 0)
        return scenario_many(&o);
    if (strcmp(sc, "barrier") == 0)
        return scenario_barrier(&o);
    if (strcmp(sc, "api") == 0)
        return scenario_api(&o);
    if (strcmp(sc, "errors") == 0)
        return scenario_errors(&o);
    if (strcmp(sc, "victim") == 0)
        return scenario_victim(&o);
    if (strcmp(sc, "group-pulls") == 0)
        return scenario_group_pulls(&o);
    if (strcmp(sc, "group-p3") == 0)
        return scenario_group_p3(&o);
    if (strcmp(sc, "peer-dead") == 0)
        return scenario_peer_dead(&o);
    if (strcmp(sc, "leave") == 0)
        return scenario_leave(&o);
    if (strcmp(sc, "early-leave") == 0)
        return scenario_early_leave(&o);
    if (strcmp(sc, "too-big") == 0)
        return scenario_too_big(&o);
    if (strcmp(sc, "create-error") == 0)
        return scenario_create_error(&o);
    if (strcmp(sc, "enomem") == 0)
        return scenario_enomem(&o);
    if (strcmp(sc, "enomem-push") == 0)
        return scenario_enomem_push(&o);
    die("unknown scenario '%s'\n%s", sc, usage_text);
}
