/* kvs-trace - read the timelines workers write with KVS_TRACE.
 *
 *   kvs-trace summary [--top N] FILE...
 *
 * For every key of every operation (one async span per key in the file)
 * it splits the time from the API call to the key's completion into: queued
 * in the library (call to first part sent), network (sending, replies, the
 * server's own queue), summing on the server, and waiting on the server for
 * the other workers' pushes of the round; it prints the totals, the slowest
 * key operations with their split, and the barriers.  The files are the
 * ones libkvs writes (one JSON event per line); a file cut short (a worker
 * that died) is read up to its last whole line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "kvs.h"

static const char usage[] =
    "usage: kvs-trace summary [--top N] FILE...\n"
    "       kvs-trace --help | --version\n"
    "\n"
    "Summarise the timelines that workers write with KVS_TRACE=FILE (Chrome\n"
    "trace-event JSON; open them in https://ui.perfetto.dev or chrome://tracing to\n"
    "see them).  For each key operation (the time from the push/pull call until the\n"
    "key's last part replied) it splits the time into:\n"
    "  queued    in the library: the call until the first part was sent\n"
    "  network   sending, the server's receive queue, the reply's way back\n"
    "  summing   on the server, adding this worker's data into the round\n"
    "  waiting   on the server, for the other workers' pushes of the round\n"
    "and prints the totals, the --top N slowest key operations (default 10) and\n"
    "the barriers.  Exit status: 0, 1 a file could not be read, 2 bad usage.\n";

typedef struct span {
    char id[48];
    int pid;
    char op[16];
    uint64_t key, round;
    double queued, first_sent, last_replied, done; /* µs; < 0: not seen */
    double server_us, sum_us, wait_us;             /* of the part that took longest */
    int parts_sent, parts_replied, parts_summed;
    uint64_t bytes;
    bool error;
} span;

static span *spans;
static size_t nspans, capspans;
static hmap index_of; /* hash(pid, id) -> index + 1 */
static int nbarriers;
static double barrier_total, barrier_max;
static unsigned long long dropped;

static uint64_t hash_id(int pid, const char *id)
{
    uint64_t h = UINT64_C(1469598103934665603) ^ (uint64_t)pid;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return hmap_mix(h);
}

static span *find_span(int pid, const char *id, bool create)
{
    uint64_t h = hash_id(pid, id);
    for (;;) { /* linear probing on collisions: rehash with a salt */
        void *v = hmap_get(&index_of, h);
        if (v == NULL)
            break;
        span *s = &spans[(size_t)(uintptr_t)v - 1];
        if (s->pid == pid && !strcmp(s->id, id))
            return s;
        h = hmap_mix(h + 1);
    }
    if (!create)
        return NULL;
    if (nspans == capspans) {
        capspans = capspans ? capspans * 2 : 1024;
        span *n = realloc(spans, capspans * sizeof *spans);
        if (n == NULL) {
            fprintf(stderr, "kvs-trace: out of memory\n");
            exit(1);
        }
        spans = n;
    }
    span *s = &spans[nspans];
    memset(s, 0, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->pid = pid;
    s->queued = s->first_sent = s->last_replied = s->done = -1;
    if (hmap_put(&index_of, h, (void *)(uintptr_t)(nspans + 1)) != 0) {
        fprintf(stderr, "kvs-trace: out of memory\n");
        exit(1);
    }
    nspans++;
    return s;
}

/* The value of "name": in a one-line JSON object: a string (copied into
 * out) or a number (as text).  false if absent. */
static bool field(const char *line, const char *name, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return false;
    p += strlen(pat);
    size_t n = 0;
    if (*p == '"') {
        p++;
        while (*p && *p != '"' && n + 1 < len)
            out[n++] = *p++;
    } else {
        while (*p && *p != ',' && *p != '}' && n + 1 < len)
            out[n++] = *p++;
    }
    out[n] = '\0';
    return true;
}

static double num(const char *line, const char *name, double def)
{
    char v[64];
    return field(line, name, v, sizeof v) ? strtod(v, NULL) : def;
}

static void take_line(const char *line)
{
    char ph[8], ev[32], id[48], pidtxt[16];
    if (!field(line, "ph", ph, sizeof ph))
        return;
    int pid = field(line, "pid", pidtxt, sizeof pidtxt) ? atoi(pidtxt) : 0;
    double ts = num(line, "ts", 0);
    if (ph[0] == 'X' && strstr(line, "\"cat\":\"barrier\"")) {
        double dur = num(line, "dur", 0);
        nbarriers++;
        barrier_total += dur;
        if (dur > barrier_max)
            barrier_max = dur;
        return;
    }
    if (ph[0] == 'M') {
        if (strstr(line, "\"kvs_trace_dropped\""))
            dropped += (unsigned long long)num(line, "dropped", 0);
        return;
    }
    if (!field(line, "event", ev, sizeof ev) || !field(line, "id", id, sizeof id))
        return;
    span *s = find_span(pid, id, true);
    if (!strcmp(ev, "queued")) {
        s->queued = ts;
        field(line, "op", s->op, sizeof s->op);
        s->key = (uint64_t)strtoull(strstr(line, "\"key\":") + 6, NULL, 10);
        s->round = (uint64_t)num(line, "round", 0);
    } else if (!strcmp(ev, "sent")) {
        if (s->first_sent < 0 || ts < s->first_sent)
            s->first_sent = ts;
        s->parts_sent++;
        s->bytes += (uint64_t)num(line, "bytes", 0);
    } else if (!strcmp(ev, "summed") || !strcmp(ev, "server")) {
        double srv = num(line, "server_us", 0), sum = num(line, "sum_us", 0);
        double wait = num(line, "round_wait_us", 0) - sum;
        s->parts_summed++;
        if (srv > s->server_us) {
            s->server_us = srv;
            s->sum_us = sum;
            s->wait_us = wait > 0 ? wait : 0;
        }
    } else if (!strcmp(ev, "replied")) {
        char st[32];
        if (ts > s->last_replied)
            s->last_replied = ts;
        s->parts_replied++;
        if (field(line, "status", st, sizeof st) && strcmp(st, "KVS_OK") != 0)
            s->error = true;
    } else if (!strcmp(ev, "done")) {
        s->done = ts;
    }
}

static int read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    if (f == NULL) {
        fprintf(stderr, "kvs-trace: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if ((n = getline(&line, &cap, f)) <= 0 || line[0] != '[') {
        fprintf(stderr, "kvs-trace: %s: not a kvsd timeline (expected a JSON array of "
                        "trace events, as KVS_TRACE writes)\n", path);
        fclose(f);
        free(line);
        return 1;
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* a last line cut short */
        take_line(line);
    }
    free(line);
    fclose(f);
    return 0;
}

typedef struct split {
    double total, queued, network, summing, waiting;
} split;

static bool complete(const span *s)
{
    return s->queued >= 0 && s->done >= 0 && s->first_sent >= 0 && s->last_replied >= 0;
}

static split split_of(const span *s)
{
    split p;
    p.total = s->done - s->queued;
    p.queued = s->first_sent - s->queued;
    p.summing = s->sum_us;
    p.waiting = s->wait_us;
    p.network = s->last_replied - s->first_sent - p.summing - p.waiting;
    if (p.network < 0)
        p.network = 0;
    return p;
}

static int by_total(const void *a, const void *b)
{
    const span *x = *(span *const *)a, *y = *(span *const *)b;
    double dx = x->done - x->queued, dy = y->done - y->queued;
    return dx < dy ? 1 : dx > dy ? -1 : 0;
}

static void pct(const char *what, double v, double total)
{
    printf("  %-28s %12.3f ms  %5.1f%%\n", what, v / 1000.0, total > 0 ? 100.0 * v / total : 0);
}

static int summary(int top)
{
    size_t ndone = 0, nerr = 0;
    split sum = {0};
    span **order = malloc((nspans ? nspans : 1) * sizeof *order);
    if (order == NULL)
        return 1;
    for (size_t i = 0; i < nspans; i++) {
        span *s = &spans[i];
        if (!complete(s))
            continue;
        split p = split_of(s);
        sum.total += p.total;
        sum.queued += p.queued;
        sum.network += p.network;
        sum.summing += p.summing;
        sum.waiting += p.waiting;
        nerr += s->error;
        order[ndone++] = s;
    }
    printf("key operations: %zu complete, %zu incomplete (queued but never done), %zu with "
           "errors; %d barriers; %llu events dropped\n",
           ndone, nspans - ndone, nerr, nbarriers, dropped);
    printf("where the time went (sum over complete key operations, %.3f ms):\n",
           sum.total / 1000.0);
    pct("queued in the library", sum.queued, sum.total);
    pct("network and server queues", sum.network, sum.total);
    pct("summing on the server", sum.summing, sum.total);
    pct("waiting for other workers", sum.waiting, sum.total);
    double rest = sum.total - sum.queued - sum.network - sum.summing - sum.waiting;
    pct("completing (after the reply)", rest > 0 ? rest : 0, sum.total);
    qsort(order, ndone, sizeof *order, by_total);
    if (top > 0 && ndone > 0) {
        printf("slowest key operations:\n");
        printf("  %-7s %-9s %12s %6s %10s %10s %10s %10s %10s %6s %12s\n", "worker", "op", "key",
               "round", "total_ms", "queued", "network", "summing", "waiting", "parts",
               "bytes");
        for (size_t i = 0; i < ndone && (int)i < top; i++) {
            const span *s = order[i];
            split p = split_of(s);
            printf("  %-7d %-9s %12llu %6llu %10.3f %10.3f %10.3f %10.3f %10.3f %6d %12llu%s\n",
                   s->pid, s->op, (unsigned long long)s->key, (unsigned long long)s->round,
                   p.total / 1000.0, p.queued / 1000.0, p.network / 1000.0,
                   p.summing / 1000.0, p.waiting / 1000.0, s->parts_sent,
                   (unsigned long long)s->bytes, s->error ? "  error" : "");
        }
    }
    if (nbarriers)
        printf("barriers: %d, %.3f ms in all, longest %.3f ms\n", nbarriers,
               barrier_total / 1000.0, barrier_max / 1000.0);
    free(order);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"top", required_argument, NULL, 't'},
                                         {NULL, 0, NULL, 0}};
    int top = 10, ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "+hVt:", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("kvs-trace (kvsd) %s\n", KVS_VERSION_STRING);
            return 0;
        case 't':
            top = (int)strtol(optarg, &end, 10);
            if (*end || top < 0) {
                fprintf(stderr, "kvs-trace: --top '%s': expected a number >= 0\n", optarg);
                return 2;
            }
            break;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind >= argc || strcmp(argv[optind], "summary") != 0) {
        fprintf(stderr, "kvs-trace: %s\n%s",
                optind >= argc ? "missing command" : "unknown command (expected 'summary')",
                usage);
        return 2;
    }
    optind++;
    /* options may also follow the command */
    while ((ch = getopt_long(argc, argv, "hVt:", opts, NULL)) != -1) {
        if (ch != 't') {
            fputs(usage, ch == 'h' ? stdout : stderr);
            return ch == 'h' ? 0 : 2;
        }
        top = (int)strtol(optarg, &end, 10);
        if (*end || top < 0) {
            fprintf(stderr, "kvs-trace: --top '%s': expected a number >= 0\n", optarg);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "kvs-trace: summary needs at least one FILE\n%s", usage);
        return 2;
    }
    hmap_init(&index_of);
    int rc = 0;
    for (int i = optind; i < argc; i++)
        rc |= read_file(argv[i]);
    if (rc)
        return 1;
    summary(top);
    hmap_fini(&index_of);
    free(spans);
    return 0;
}
