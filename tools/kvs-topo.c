/* kvs-topo - print link topologies, plan reduction trees, score tree sets.
 *
 *   kvs-topo plan   [--topologies FILE] [--mode kl|backtrack] [--penalty P]
 *                   [--one-tree | --reference] [--max-trees K] [--effort PCT] [--json]
 *   kvs-topo score  --topologies FILE --trees PLAN.json [--json]
 *   kvs-topo parse-smi FILE
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

#include <sodium.h>

#include "common/config.h"
#include "tree/tree.h"
#include "tree/json.h"

static void usage(FILE *f)
{
    fputs("usage:\n"
          "  kvs-topo plan   [--topologies FILE] [--mode kl|backtrack] [--penalty P]\n"
          "                  [--one-tree | --reference] [--max-trees K] [--effort PCT] [--json]\n"
          "  kvs-topo score  --topologies FILE --trees PLAN.json [--json]\n"
          "  kvs-topo parse-smi FILE      (`nvidia-smi topo -m` text -> KVS_TOPOLOGY string)\n"
          "  kvs-topo detect [--raw] [--json]\n"
          "  kvs-topo gen    --n N [--count K] [--density D] [--seed S] [--weights 1,2,3]\n"
          "FILE: {\"topologies\": [...]} JSON, a matrix, or `nvidia-smi topo -m` text.\n"
          "Without --topologies, plan reads the matrix from KVS_TOPOLOGY\n"
          "(rows separated by ';', weights by ',', e.g. \"0,2,2;2,0,3;2,3,0\"; or @FILE).\n"
          "plan: weighted trees (several per root) by default; --one-tree: one tree per\n"
          "root (the v1 planner); --reference: the MXNet-like planner.\n",
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
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int bad_arg(const char *flag, const char *v, const char *want)
{
    fprintf(stderr, "kvs-topo: %s '%s': expected %s\n", flag, v ? v : "", want);
    return 2;
}

/* getopt_long stopped at argv[optind - 1] (opterr = 0): unknown, or its
 * value is missing. */
static int bad_option(char **argv)
{
    fprintf(stderr, "kvs-topo %s: '%s': unknown option or missing value\n", argv[1],
            argv[optind - 1]);
    usage(stderr);
    return 2;
}

static int extra_arg(char **argv, int i)
{
    fprintf(stderr, "kvs-topo %s: unexpected argument '%s'\n", argv[1], argv[i]);
    usage(stderr);
    return 2;
}

/* The environment (KVS_TOPOLOGY and the planner's variables), loaded once;
 * a value that does not parse ends the program (exit 2). */
static const cfg *env_cfg(void)
{
    static cfg c;
    static bool loaded;
    char err[512];
    if (!loaded) {
        if (cfg_load(&c, false, err, sizeof err) != 0) {
            fprintf(stderr, "kvs-topo: %s\n", err);
            exit(2);
        }
        loaded = true;
    }
    return &c;
}

/* A JSON file starts with '{' (after blanks); anything else is a matrix or
 * `nvidia-smi topo -m` text. */
static bool is_json_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = ' ';
    if (f == NULL)
        return true; /* the JSON reader names the file and the error */
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        c = fgetc(f);
    fclose(f);
    return c == '{';
}

static int load_topos(const char *path, tree_topo **list, int *count)
{
    char err[1024];
    int rc;
    if (path != NULL && !is_json_file(path)) {
        /* a matrix or `nvidia-smi topo -m` text */
        *list = calloc(1, sizeof **list);
        if (*list == NULL)
            return 1;
        rc = tree_topo_load_file(path, NULL, *list, err, sizeof err);
        if (rc != 0)
            free(*list);
        *count = 1;
    } else if (path != NULL) {
        rc = tree_topo_load_json(path, list, count, err, sizeof err);
    } else {
        bool found;
        *list = calloc(1, sizeof **list);
        if (*list == NULL)
            return 1;
        rc = tree_topo_from_spec(env_cfg()->topology, *list, &found, err, sizeof err);
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

/* SHA-256 of the matrix as a KVS_TOPOLOGY string: rows joined by ';',
 * weights by ',', each weight printed with %.17g. */
static void matrix_sha256(const tree_topo *t, char hex[65])
{
    crypto_hash_sha256_state st;
    unsigned char h[crypto_hash_sha256_BYTES];
    char buf[64];
    crypto_hash_sha256_init(&st);
    for (int i = 0; i < t->n; i++)
        for (int j = 0; j < t->n; j++) {
            int k = snprintf(buf, sizeof buf, "%s%.17g", j ? "," : (i ? ";" : ""),
                             tree_w(t, i, j));
            crypto_hash_sha256_update(&st, (const unsigned char *)buf, (unsigned long long)k);
        }
    crypto_hash_sha256_final(&st, h);
    for (size_t i = 0; i < sizeof h; i++)
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

static void print_plan_json(const tree_topo *t, const tree_opts *o, const char *kind,
                            const tree_wplan *p, int rc, const char *err, double ms, int k)
{
    char hex[65];
    double lb = 0;
    char berr[256];
    tree_edge edges[TREE_MAX_N];
    matrix_sha256(t, hex);
    printf("%s\n {\"topology\": ", k ? "," : "");
    tj_print_str(stdout, t->name);
    printf(", \"n\": %d, \"matrix_sha256\": \"%s\", \"mode\": \"%s\", \"ok\": %s, \"error\": ",
           t->n, hex, o->mode == TREE_MODE_KL ? "kl" : "backtrack", rc == 0 ? "true" : "false");
    tj_print_str(stdout, rc == 0 ? "" : err);
    printf(", \"time_ms\": %.3f, \"load\": ", ms);
    if (rc == 0 && isfinite(tree_wplan_load(t, p)))
        printf("%.17g", tree_wplan_load(t, p));
    else
        printf("null");
    printf(", \"lb_frac\": ");
    if (tree_frac_bound(t, &lb, NULL, berr, sizeof berr) == 0)
        printf("%.17g", lb);
    else
        printf("null");
    printf(", \"denominator\": %u, \"options\": {\"planner\": \"%s\", \"penalty\": %.17g, "
           "\"effort\": %llu, \"max_trees\": %d}, \"trees\": [",
           rc == 0 ? p->denominator : 0, kind, o->penalty, (unsigned long long)o->effort,
           o->max_trees > 0 ? o->max_trees : 4 * t->n);
    for (int i = 0; rc == 0 && i < p->ntrees; i++) {
        int ne = tree_wplan_edges(p, i, edges);
        printf("%s{\"root\": %d, \"parts\": %u, \"weight\": %.17g, \"edges\": [", i ? ", " : "",
               p->root[i], p->parts[i], (double)p->parts[i] / p->denominator);
        for (int e = 0; e < ne; e++)
            printf("%s[%d, %d, %d]", e ? ", " : "", edges[e].parent, edges[e].child,
                   edges[e].round);
        printf("]}");
    }
    printf("]}");
}

static void print_plan_text(const tree_topo *t, const tree_opts *o, const char *kind,
                            const tree_wplan *p, int rc, const char *err, double ms)
{
    double lb = 0;
    char berr[256];
    printf("== %s (%d GPUs, %s, %s): ", t->name[0] ? t->name : "(unnamed)", t->n,
           o->mode == TREE_MODE_KL ? "kl" : "backtrack", kind);
    if (rc != 0) {
        printf("FAILED: %s\n", err);
        return;
    }
    tree_frac_bound(t, &lb, NULL, berr, sizeof berr);
    printf("%.3f ms, %d trees, %d rounds, load %g, bound %g (%.4fx)\n", ms, p->ntrees, p->rounds,
           tree_wplan_load(t, p), lb, lb > 0 ? tree_wplan_load(t, p) / lb : 0.0);
    for (int i = 0; i < p->ntrees; i++) {
        printf("tree %d: root GPU %d, parts %u/%u, parents", i, p->root[i], p->parts[i],
               p->denominator);
        for (int v = 0; v < p->n; v++)
            printf(" %d", p->parent[(size_t)i * (size_t)p->n + (size_t)v]);
        printf("\n");
    }
}

static int cmd_plan(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false, reference = false, one = false;
    tree_opts o;
    char err[512];
    tree_topo *topos = NULL;
    int count = 0, rc, failed = 0;
    tree_opts_from_cfg(&o, env_cfg());
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},          {"reference", no_argument, NULL, 'r'},
        {"one-tree", no_argument, NULL, '1'},      {"max-trees", required_argument, NULL, 'x'},
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
        case '1': one = true; break;
        case 't': path = optarg; break;
        case 'x': {
            long m = strtol(optarg, &end, 10);
            if (*end || end == optarg || m < 1 || m > 4 * TREE_MAX_N)
                return bad_arg("--max-trees", optarg, "an integer in 1..256");
            o.max_trees = (int)m;
            break;
        }
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
            return bad_option(argv);
        }
    }
    if (optind < argc)
        return extra_arg(argv, optind);
    if ((rc = load_topos(path, &topos, &count)) != 0)
        return rc;
    const char *kind = reference ? "reference" : one ? "one-tree" : "weighted";
    if (json)
        printf("{\"format\": \"kvs-tree-plan-v2\", \"results\": [");
    for (int k = 0; k < count; k++) {
        const tree_topo *t = &topos[k];
        tree_wplan p;
        double t0 = now_ms(), ms;
        memset(&p, 0, sizeof p);
        err[0] = '\0';
        if (reference || one) {
            tree_set s;
            rc = reference ? tree_plan_mxnet_like(t, &o, &s, err, sizeof err)
                           : tree_plan(t, &o, &s, err, sizeof err);
            if (rc == 0) {
                rc = tree_wplan_from_set(&s, &p);
                tree_set_fini(&s);
                if (rc != 0)
                    snprintf(err, sizeof err, "out of memory");
            }
        } else {
            rc = tree_plan_weighted(t, &o, &p, err, sizeof err);
        }
        ms = now_ms() - t0;
        if (rc != 0)
            failed++;
        if (json)
            print_plan_json(t, &o, kind, &p, rc, err, ms, k);
        else
            print_plan_text(t, &o, kind, &p, rc, err, ms);
        tree_wplan_fini(&p);
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

/* Fill *p from one result object (format v2: trees with "parts" and the
 * result's "denominator"; v1: one tree per root without parts, each 1/n).
 * 0, or -1 with err (p is then finished). */
static int read_plan(const tj_val *res, int n, tree_wplan *p, char *err, size_t errlen)
{
    const tj_val *ok = tj_get(res, "ok"), *trees = tj_get(res, "trees"), *e;
    tree_edge edges[TREE_MAX_N];
    int nt, den = n, with_parts = -1, count[TREE_MAX_N] = {0};
    memset(p, 0, sizeof *p);
    if (ok != NULL && ok->type == TJ_FALSE) {
        e = tj_get(res, "error");
        snprintf(err, errlen, "planner failed: %s", e && e->type == TJ_STR ? e->str : "");
        return -1;
    }
    if (trees == NULL || trees->type != TJ_ARR || trees->len < 1 ||
        trees->len > (size_t)64 * TREE_MAX_N) {
        snprintf(err, errlen, "\"trees\" missing, empty, not an array or more than %d",
                 64 * TREE_MAX_N);
        return -1;
    }
    nt = (int)trees->len;
    for (int i = 0; i < nt; i++) {
        int has = tj_get(&trees->items[i], "parts") != NULL;
        if (with_parts >= 0 && has != with_parts) {
            snprintf(err, errlen, "trees[%d]: \"parts\" on some trees only", i);
            return -1;
        }
        with_parts = has;
    }
    if (with_parts) {
        e = tj_get(res, "denominator");
        if (int_of(e, &den) != 0 || den < 1) {
            snprintf(err, errlen, "\"denominator\" missing or not a positive integer");
            return -1;
        }
    }
    if (tree_wplan_init(p, n, nt, (uint32_t)den) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < nt; i++) {
        const tj_val *tr = &trees->items[i], *ev = tj_get(tr, "edges");
        int root, ne, parts = 1, *par = p->parent + (size_t)i * (size_t)n, *rnd = p->round + (size_t)i * (size_t)n;
        if (int_of(tj_get(tr, "root"), &root) != 0 || root < 0 || root >= n) {
            snprintf(err, errlen, "trees[%d]: \"root\" missing or not in 0..%d", i, n - 1);
            goto fail;
        }
        if (with_parts && (int_of(tj_get(tr, "parts"), &parts) != 0 || parts < 1)) {
            snprintf(err, errlen, "trees[%d]: \"parts\" is not a positive integer", i);
            goto fail;
        }
        if (!with_parts && count[root] > 0) {
            snprintf(err, errlen, "two trees with root %d (and no \"parts\")", root);
            goto fail;
        }
        count[root]++;
        p->root[i] = root;
        p->parts[i] = (uint32_t)parts;
        par[root] = -1;
        if (ev == NULL || ev->type != TJ_ARR || ev->len > (size_t)n - 1) {
            snprintf(err, errlen, "trees[%d]: \"edges\" missing, not an array or more than %d", i,
                     n - 1);
            goto fail;
        }
        ne = (int)ev->len;
        for (int k = 0; k < ne; k++) {
            const tj_val *x = &ev->items[k];
            if (x->type != TJ_ARR || x->len != 3 || int_of(&x->items[0], &edges[k].parent) ||
                int_of(&x->items[1], &edges[k].child) || int_of(&x->items[2], &edges[k].round)) {
                snprintf(err, errlen, "trees[%d]: edges[%d] is not [parent, child, stage]", i, k);
                goto fail;
            }
            if (edges[k].parent < 0 || edges[k].parent >= n || edges[k].child < 0 ||
                edges[k].child >= n || edges[k].child == root) {
                snprintf(err, errlen, "trees[%d]: edges[%d] [%d, %d, %d]: GPU out of 0..%d or the root as child",
                         i, k, edges[k].parent, edges[k].child, edges[k].round, n - 1);
                goto fail;
            }
            if (par[edges[k].child] != -2) {
                snprintf(err, errlen, "trees[%d]: GPU %d is reached more than once", i,
                         edges[k].child);
                goto fail;
            }
            par[edges[k].child] = edges[k].parent;
            rnd[edges[k].child] = edges[k].round;
            if (edges[k].round > p->rounds)
                p->rounds = edges[k].round;
        }
    }
    if (!with_parts)
        for (int r = 0; r < n; r++)
            if (count[r] != 1) {
                snprintf(err, errlen, "no tree with root %d", r);
                goto fail;
            }
    return 0;
fail:
    tree_wplan_fini(p);
    return -1;
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
            return bad_option(argv);
        }
    }
    if (optind < argc)
        return extra_arg(argv, optind);
    if (spath == NULL) {
        fprintf(stderr, "kvs-topo score: --trees TREES.json is required\n");
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
        fprintf(stderr, "kvs-topo: %s: expected {\"format\": \"kvs-tree-plan-v2\", "
                        "\"results\": [...]}\n", spath);
        tj_free(doc);
        tree_topo_list_free(topos, count);
        return 1;
    }
    if (json)
        printf("{\"scores\": [");
    else
        printf("%-24s %-5s %6s %6s %14s %14s %8s  %s\n", "topology", "valid", "trees", "rounds",
               "load", "lb_frac", "ratio", "error");
    for (size_t i = 0; i < results->len; i++) {
        const tj_val *res = &results->items[i], *name = tj_get(res, "topology");
        const tree_topo *t = NULL;
        tree_wplan p;
        bool valid = false;
        double load = INFINITY, lb = 0;
        char msg[512] = "";
        memset(&p, 0, sizeof p);
        for (int k = 0; k < count && t == NULL; k++)
            if (name != NULL && name->type == TJ_STR && !strcmp(name->str, topos[k].name))
                t = &topos[k];
        if (t == NULL && i < (size_t)count && (name == NULL || name->type != TJ_STR))
            t = &topos[i];
        if (t == NULL) {
            snprintf(msg, sizeof msg, "no such topology in the topologies file");
        } else if (read_plan(res, t->n, &p, err, sizeof err) != 0) {
            snprintf(msg, sizeof msg, "%s", err);
        } else {
            valid = tree_wplan_validate(t, &p, msg, sizeof msg) == 0;
            load = tree_wplan_load(t, &p);
        }
        if (t != NULL && tree_frac_bound(t, &lb, NULL, err, sizeof err) != 0)
            lb = 0;
        if (!valid)
            bad++;
        const char *nm = name && name->type == TJ_STR ? name->str : (t ? t->name : "?");
        if (json) {
            printf("%s\n {\"topology\": ", i ? "," : "");
            tj_print_str(stdout, nm);
            printf(", \"valid\": %s, \"error\": ", valid ? "true" : "false");
            tj_print_str(stdout, msg);
            printf(", \"trees\": %d, \"rounds\": %d, \"load\": ", p.ntrees, p.rounds);
            if (isfinite(load))
                printf("%.17g", load);
            else
                printf("null");
            printf(", \"lb_frac\": %.17g, \"ratio\": ", lb);
            if (isfinite(load) && lb > 0)
                printf("%.17g", load / lb);
            else
                printf("null");
            /* reduce_load_time: v1's name of the same quantity */
            printf(", \"reduce_load_time\": ");
            if (isfinite(load))
                printf("%.17g}", load);
            else
                printf("null}");
        } else {
            printf("%-24s %-5s %6d %6d %14g %14g %8.4f  %s\n", nm, valid ? "yes" : "NO", p.ntrees,
                   p.rounds, load, lb, lb > 0 && isfinite(load) ? load / lb : 0.0, msg);
        }
        tree_wplan_fini(&p);
    }
    if (json)
        printf("\n]}\n");
    tj_free(doc);
    tree_topo_list_free(topos, count);
    return bad ? 1 : 0;
}

/* -------------------------------------------------------------- parse-smi */

static int cmd_parse_smi(int argc, char **argv)
{
    char err[1024], *text = NULL, *out;
    size_t len, need;
    tree_topo t;
    int rc;
    if (argc > 3)
        return extra_arg(argv, 3);
    if (argc < 3) {
        fprintf(stderr, "kvs-topo parse-smi: FILE is required\n");
        usage(stderr);
        return 2;
    }
    if ((rc = tj_read_file(argv[2], &text, &len, err, sizeof err)) == 0)
        rc = tree_topo_parse_smi(text, len, argv[2], &t, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "kvs-topo parse-smi: %s\n", err);
        return 1;
    }
    need = tree_topo_format(&t, NULL, 0);
    out = malloc(need + 1);
    if (out == NULL) {
        tree_topo_fini(&t);
        return 1;
    }
    tree_topo_format(&t, out, need + 1);
    printf("%s\n", out);
    free(out);
    tree_topo_fini(&t);
    return 0;
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
            return bad_option(argv);
        }
    }
    if (optind < argc)
        return extra_arg(argv, optind);
    if (tree_topo_detect(&t, raw, env_cfg()->cuda_plugin, err, sizeof err) != 0) {
        fprintf(stderr, "kvs-topo detect: %s\n", err);
        return 1;
    }
    if (json) {
        printf("{\"topologies\": [");
        print_matrix_json(stdout, &t);
        printf("]}\n");
    } else {
        size_t need = tree_topo_format(&t, NULL, 0);
        char *str = malloc(need + 1);
        printf("detected: %s\n", t.name);
        tree_topo_print(&t, stdout);
        if (str != NULL) {
            tree_topo_format(&t, str, need + 1);
            printf("KVS_TOPOLOGY=%s\n", str);
            free(str);
        }
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
            return bad_option(argv);
        }
    }
    if (optind < argc)
        return extra_arg(argv, optind);
    if (n < 1) {
        fprintf(stderr, "kvs-topo gen: --n N (1..%d) is required\n", TREE_MAX_N);
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
    if (!strcmp(argv[1], "parse-smi"))
        return cmd_parse_smi(argc, argv);
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
    fprintf(stderr, "kvs-topo: unknown command '%s': expected plan, score, parse-smi, detect or "
            "gen\n", argv[1]);
    usage(stderr);
    return 2;
}
