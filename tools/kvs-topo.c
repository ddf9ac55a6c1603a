/* kvs-topo - print link topologies, plan reduction trees, score tree sets.
 *
 *   kvs-topo plan   [--topologies FILE.json] [--mode kl|backtrack] [--penalty P]
 *                   [--reference] [--effort PCT] [--json]
 *   kvs-topo score  --topologies FILE.json --trees TREES.json [--json]
 *   kvs-topo detect [--raw] [--json]
 *   kvs-topo gen    --n N [--count K] [--density D] [--seed S] [--weights W1,W2,...]
 *
 * plan reads KVS_TOPOLOGY when --topologies is not given.  Defaults for mode
 * and penalty come from MXNET_KVSTORE_TREE_BACKTRACK and
 * MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY; flags override them.  --reference
 * runs the MXNet-like reference planner instead of ours.
 * Exit: 0 all planned / scored valid, 1 a topology failed or a tree set is
 * invalid (output is still complete), 2 usage or configuration error. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "tree/tree.h"
#include "tree/json.h"

static void usage(FILE *f)
{
    fputs("usage:\n"
          "  kvs-topo plan   [--topologies FILE.json] [--mode kl|backtrack] [--penalty P]\n"
          "                  [--reference] [--effort PCT] [--json]\n"
          "  kvs-topo score  --topologies FILE.json --trees TREES.json [--json]\n"
          "  kvs-topo detect [--raw] [--json]\n"
          "  kvs-topo gen    --n N [--count K] [--density D] [--seed S] [--weights 1,2,3]\n"
          "Without --topologies, plan reads the matrix from KVS_TOPOLOGY\n"
          "(rows separated by ';', weights by ',', e.g. \"0,2,2;2,0,3;2,3,0\").\n",
          f);
}

static uint64_t rng(uint64_t *s) /* xorshift64* */
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int bad_arg(const char *flag, const char *v, const char *want)
{
    fprintf(stderr, "kvs-topo: %s '%s': expected %s\n", flag, v ? v : "", want);
    return 2;
}

static int load_topos(const char *path, tree_topo **list, int *count)
{
    char err[512];
    int rc;
    if (path != NULL) {
        rc = tree_topo_load_json(path, list, count, err, sizeof err);
    } else {
        bool found;
        *list = calloc(1, sizeof **list);
        if (*list == NULL)
            return 1;
        rc = tree_topo_from_env(*list, &found, err, sizeof err);
        if (rc == 0 && !found) {
            fprintf(stderr, "kvs-topo: no --topologies FILE and KVS_TOPOLOGY is not set\n");
            free(*list);
            return 2;
        }
        *count = 1;
    }
    if (rc != 0) {
        fprintf(stderr, "kvs-topo: %s\n", err);
        if (path == NULL)
            free(*list);
        return rc == KVS_ECONFIG ? 2 : 1;
    }
    return 0;
}

static void print_matrix_json(FILE *f, const tree_topo *t)
{
    fputs("{\"name\": ", f);
    tj_print_str(f, t->name);
    fprintf(f, ", \"n\": %d, \"weights\": [", t->n);
    for (int i = 0; i < t->n; i++) {
        fputs(i ? ", [" : "[", f);
        for (int j = 0; j < t->n; j++)
            fprintf(f, "%s%.17g", j ? ", " : "", tree_w(t, i, j));
        fputc(']', f);
    }
    fputs("]}", f);
}

/* ------------------------------------------------------------------- plan */

static int cmd_plan(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false, reference = false;
    tree_opts o;
    char err[512];
    tree_topo *topos = NULL;
    int count = 0, rc, failed = 0;
    tree_edge edges[TREE_MAX_N];
    if ((rc = tree_opts_from_env(&o, err, sizeof err)) != 0) {
        fprintf(stderr, "kvs-topo: %s\n", err);
        return 2;
    }
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},          {"reference", no_argument, NULL, 'r'},
        {"topologies", required_argument, NULL, 't'}, {"mode", required_argument, NULL, 'm'},
        {"penalty", required_argument, NULL, 'p'},  {"effort", required_argument, NULL, 'e'},
        {NULL, 0, NULL, 0}};
    int ch;
    char *end;
    opterr = 0;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 'r': reference = true; break;
        case 't': path = optarg; break;
        case 'm':
            if (!strcmp(optarg, "kl"))
                o.mode = TREE_MODE_KL;
            else if (!strcmp(optarg, "backtrack"))
                o.mode = TREE_MODE_BACKTRACK;
            else
                return bad_arg("--mode", optarg, "kl or backtrack");
            break;
        case 'p':
            o.penalty = strtod(optarg, &end);
            if (*end || end == optarg || !(o.penalty > 0 && o.penalty <= 1))
                return bad_arg("--penalty", optarg, "a number in (0, 1]");
            break;
        case 'e': {
            unsigned long long e = strtoull(optarg, &end, 10);
            if (*end || end == optarg || e > 10000)
                return bad_arg("--effort", optarg, "an integer percentage 0..10000");
            o.effort = e;
            break;
        }
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if ((rc = load_topos(path, &topos, &count)) != 0)
        return rc;
    if (json)
        printf("{\"results\": [");
    for (int k = 0; k < count; k++) {
        const tree_topo *t = &topos[k];
        tree_set s;
        double t0 = now_ms(), ms;
        err[0] = '\0';
        rc = reference ? tree_plan_mxnet_like(t, &o, &s, err, sizeof err)
                       : tree_plan(t, &o, &s, err, sizeof err);
        ms = now_ms() - t0;
        if (rc != 0)
            failed++;
        if (json) {
            printf("%s\n {\"topology\": ", k ? "," : "");
            tj_print_str(stdout, t->name);
            printf(", \"mode\": \"%s\", \"ok\": %s, \"error\": ",
                   o.mode == TREE_MODE_KL ? "kl" : "backtrack", rc == 0 ? "true" : "false");
            tj_print_str(stdout, rc == 0 ? "" : err);
            printf(", \"time_ms\": %.3f, \"trees\": [", ms);
            for (int r = 0; rc == 0 && r < t->n; r++) {
                int ne = tree_set_edges(&s, r, edges);
                printf("%s{\"root\": %d, \"edges\": [", r ? ", " : "", r);
                for (int e = 0; e < ne; e++)
                    printf("%s[%d, %d, %d]", e ? ", " : "", edges[e].parent, edges[e].child,
                           edges[e].round);
                printf("]}");
            }
            printf("]}");
        } else {
            printf("== %s (%d GPUs, %s%s): ", t->name[0] ? t->name : "(unnamed)", t->n,
                   o.mode == TREE_MODE_KL ? "kl" : "backtrack", reference ? ", reference" : "");
            if (rc != 0) {
                printf("FAILED: %s\n", err);
            } else {
                tree_score sc;
                tree_score_compute(t, &s, &sc);
                printf("%.3f ms, %d rounds, reduce_load_time %g, bottleneck sum %g, directed "
                       "congestion %d\n",
                       ms, sc.rounds, sc.reduce_load_time, sc.bottleneck_sum, sc.congestion);
                tree_set_print(t, &s, stdout);
            }
        }
        if (rc == 0)
            tree_set_fini(&s);
    }
    if (json)
        printf("\n]}\n");
    tree_topo_list_free(topos, count);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ score */

static int int_of(const tj_val *v, int *out)
{
    if (v == NULL || v->type != TJ_NUM || v->num != floor(v->num) || fabs(v->num) > 1e9)
        return -1;
    *out = (int)v->num;
    return 0;
}

/* Fill s from one result object; 0, or -1 with err. */
static int read_trees(const tj_val *res, tree_set *s, char *err, size_t errlen)
{
    const tj_val *ok = tj_get(res, "ok"), *trees = tj_get(res, "trees"), *e;
    bool seen[TREE_MAX_N] = {false};
    tree_edge edges[TREE_MAX_N];
    if (ok != NULL && ok->type == TJ_FALSE) {
        e = tj_get(res, "error");
        snprintf(err, errlen, "planner failed: %s", e && e->type == TJ_STR ? e->str : "");
        return -1;
    }
    if (trees == NULL || trees->type != TJ_ARR) {
        snprintf(err, errlen, "\"trees\" missing or not an array");
        return -1;
    }
    for (size_t i = 0; i < trees->len; i++) {
        const tj_val *tr = &trees->items[i], *ev = tj_get(tr, "edges");
        int root, ne;
        if (int_of(tj_get(tr, "root"), &root) != 0 || root < 0 || root >= s->n) {
            snprintf(err, errlen, "trees[%zu]: \"root\" missing or not in 0..%d", i, s->n - 1);
            return -1;
        }
        if (seen[root]) {
            snprintf(err, errlen, "two trees with root %d", root);
            return -1;
        }
        seen[root] = true;
        if (ev == NULL || ev->type != TJ_ARR || ev->len > (size_t)s->n - 1) {
            snprintf(err, errlen, "tree %d: \"edges\" missing, not an array or more than %d",
                     root, s->n - 1);
            return -1;
        }
        ne = (int)ev->len;
        for (int k = 0; k < ne; k++) {
            const tj_val *x = &ev->items[k];
            if (x->type != TJ_ARR || x->len != 3 || int_of(&x->items[0], &edges[k].parent) ||
                int_of(&x->items[1], &edges[k].child) || int_of(&x->items[2], &edges[k].round)) {
                snprintf(err, errlen, "tree %d: edges[%d] is not [parent, child, round]", root, k);
                return -1;
            }
        }
        if (tree_set_from_edges(s, root, edges, ne, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static int cmd_score(int argc, char **argv)
{
    const char *tpath = NULL, *spath = NULL;
    bool json = false;
    char err[512], *text = NULL;
    size_t len;
    tree_topo *topos = NULL;
    int count = 0, rc, bad = 0;
    tj_val *doc = NULL;
    const tj_val *results;
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"topologies", required_argument, NULL, 't'},
                                             {"trees", required_argument, NULL, 's'},
                                             {NULL, 0, NULL, 0}};
    int ch;
    opterr = 0;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 't': tpath = optarg; break;
        case 's': spath = optarg; break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (spath == NULL || optind < argc) {
        usage(stderr);
        return 2;
    }
    if ((rc = load_topos(tpath, &topos, &count)) != 0)
        return rc;
    rc = tj_read_file(spath, &text, &len, err, sizeof err);
    if (rc == 0)
        rc = tj_parse(text, len, spath, &doc, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "kvs-topo: %s\n", err);
        tree_topo_list_free(topos, count);
        return 1;
    }
    results = tj_get(doc, "results");
    if (results == NULL || results->type != TJ_ARR) {
        fprintf(stderr, "kvs-topo: %s: expected {\"results\": [...]}\n", spath);
        tj_free(doc);
        tree_topo_list_free(topos, count);
        return 1;
    }
    if (json)
        printf("{\"scores\": [");
    else
        printf("%-20s %-5s %7s %6s %14s %10s %16s  %s\n", "topology", "valid", "nonlink",
               "rounds", "bottleneck_sum", "congestion", "reduce_load_time", "bottlenecks");
    for (size_t i = 0; i < results->len; i++) {
        const tj_val *res = &results->items[i], *name = tj_get(res, "topology");
        const tree_topo *t = NULL;
        tree_set s;
        tree_score sc;
        memset(&sc, 0, sizeof sc);
        for (int k = 0; k < count && t == NULL; k++)
            if (name != NULL && name->type == TJ_STR && !strcmp(name->str, topos[k].name))
                t = &topos[k];
        if (t == NULL && i < (size_t)count && (name == NULL || name->type != TJ_STR))
            t = &topos[i];
        if (t == NULL) {
            snprintf(sc.error, sizeof sc.error, "no such topology in the topologies file");
        } else if (tree_set_init(&s, t->n) != 0) {
            snprintf(sc.error, sizeof sc.error, "out of memory");
        } else {
            if (read_trees(res, &s, err, sizeof err) == 0) {
                tree_score_compute(t, &s, &sc);
            } else {
                memset(&sc, 0, sizeof sc);
                snprintf(sc.error, sizeof sc.error, "%.255s", err);
            }
            tree_set_fini(&s);
        }
        if (!sc.valid)
            bad++;
        const char *nm = name && name->type == TJ_STR ? name->str : (t ? t->name : "?");
        if (json) {
            printf("%s\n {\"topology\": ", i ? "," : "");
            tj_print_str(stdout, nm);
            printf(", \"valid\": %s, \"error\": ", sc.valid ? "true" : "false");
            tj_print_str(stdout, sc.error);
            printf(", \"nonlink_edges\": %d, \"rounds\": %d, \"bottlenecks\": [", sc.nonlink_edges,
                   sc.rounds);
            for (int r = 0; t != NULL && r < t->n; r++)
                printf("%s%.17g", r ? ", " : "", sc.bottleneck[r]);
            printf("], \"bottleneck_sum\": %.17g, \"directed_congestion\": %d, "
                   "\"reduce_load_time\": ",
                   sc.bottleneck_sum, sc.congestion);
            if (isfinite(sc.reduce_load_time))
                printf("%.17g}", sc.reduce_load_time);
            else
                printf("null}");
        } else {
            printf("%-20s %-5s %7d %6d %14g %10d %16g  ", nm, sc.valid ? "yes" : "NO",
                   sc.nonlink_edges, sc.rounds, sc.bottleneck_sum, sc.congestion,
                   sc.reduce_load_time);
            for (int r = 0; t != NULL && r < t->n; r++)
                printf("%s%g", r ? " " : "", sc.bottleneck[r]);
            printf("%s%s\n", sc.error[0] ? "  error: " : "", sc.error);
        }
    }
    if (json)
        printf("\n]}\n");
    tj_free(doc);
    tree_topo_list_free(topos, count);
    return bad ? 1 : 0;
}

/* ----------------------------------------------------------------- detect */

static int cmd_detect(int argc, char **argv)
{
    bool raw = false, json = false;
    tree_topo t;
    char err[512];
    static const struct option longopts[] = {{"raw", no_argument, NULL, 'r'},
                                             {"json", no_argument, NULL, 'j'},
                                             {NULL, 0, NULL, 0}};
    int ch;
    opterr = 0;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'r': raw = true; break;
        case 'j': json = true; break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (tree_topo_detect(&t, raw, err, sizeof err) != 0) {
        fprintf(stderr, "kvs-topo detect: %s\n", err);
        return 1;
    }
    if (json) {
        printf("{\"topologies\": [");
        print_matrix_json(stdout, &t);
        printf("]}\n");
    } else {
        tree_topo_print(&t, stdout);
    }
    tree_topo_fini(&t);
    return 0;
}

/* -------------------------------------------------------------------- gen */

static int cmd_gen(int argc, char **argv)
{
    long n = 0, count = 1;
    double density = 0.5, wl[16] = {1, 2, 3};
    int nw = 3;
    uint64_t seed = 1;
    static const struct option longopts[] = {
        {"n", required_argument, NULL, 'n'},       {"count", required_argument, NULL, 'c'},
        {"density", required_argument, NULL, 'd'}, {"seed", required_argument, NULL, 's'},
        {"weights", required_argument, NULL, 'w'}, {NULL, 0, NULL, 0}};
    int ch;
    char *end;
    opterr = 0;
    optind = 2;
    while ((ch = getopt_long_only(argc, argv, "", longopts, NULL)) != -1) {
        const char *v = optarg;
        switch (ch) {
        case 'n':
            n = strtol(v, &end, 10);
            if (*end || n < 1 || n > TREE_MAX_N)
                return bad_arg("--n", v, "an integer in 1..64");
            break;
        case 'c':
            count = strtol(v, &end, 10);
            if (*end || count < 1 || count > 100000)
                return bad_arg("--count", v, "an integer in 1..100000");
            break;
        case 'd':
            density = strtod(v, &end);
            if (*end || !(density >= 0 && density <= 1))
                return bad_arg("--density", v, "a number in [0, 1]");
            break;
        case 's':
            seed = strtoull(v, &end, 10);
            if (*end)
                return bad_arg("--seed", v, "an integer");
            break;
        case 'w': {
            const char *p = v;
            nw = 0;
            while (*p && nw < 16) {
                wl[nw] = strtod(p, &end);
                if (end == p || !(wl[nw] > 0))
                    return bad_arg("--weights", v, "positive numbers separated by ','");
                nw++;
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                    return bad_arg("--weights", v, "positive numbers separated by ','");
            }
            break;
        }
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (n < 1) {
        usage(stderr);
        return 2;
    }
    uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 12345;
    printf("{\"topologies\": [");
    for (long k = 0; k < count; k++) {
        tree_topo t;
        int perm[TREE_MAX_N];
        if (tree_topo_init(&t, (int)n) != 0)
            return 1;
        snprintf(t.name, sizeof t.name, "rand-n%ld-d%g-s%llu-%ld", n, density,
                 (unsigned long long)seed, k);
        for (int i = 0; i < n; i++)
            perm[i] = i;
        for (int i = (int)n - 1; i > 0; i--) {
            int j = (int)(rng(&st) % (uint64_t)(i + 1)), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        /* a random spanning tree keeps it connected, then random extra links */
        for (int i = 1; i < n; i++) {
            int a = perm[i], b = perm[rng(&st) % (uint64_t)i];
            double x = wl[rng(&st) % (uint64_t)nw];
            t.w[a * n + b] = t.w[b * n + a] = x;
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                double u = (double)(rng(&st) >> 11) / 9007199254740992.0;
                double x = wl[rng(&st) % (uint64_t)nw];
                if (t.w[i * n + j] == 0 && u < density)
                    t.w[i * n + j] = t.w[j * n + i] = x;
            }
        printf("%s\n ", k ? "," : "");
        print_matrix_json(stdout, &t);
        tree_topo_fini(&t);
    }
    printf("\n]}\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "plan"))
        return cmd_plan(argc, argv);
    if (!strcmp(argv[1], "score"))
        return cmd_score(argc, argv);
    if (!strcmp(argv[1], "detect"))
        return cmd_detect(argc, argv);
    if (!strcmp(argv[1], "gen"))
        return cmd_gen(argc, argv);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kvs-topo (kvsd) %s\n", KVS_VERSION_STRING);
        return 0;
    }
    usage(stderr);
    return 2;
}
