/* topo.c - link matrices: parsing (string, JSON), MXNet's CUDA adjustment,
 * connectivity, and the tree/ environment variables. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "tree/tree_int.h"

int tree_topo_init(tree_topo *t, int n)
{
    memset(t, 0, sizeof *t);
    if (n < 1 || n > TREE_MAX_N)
        return KVS_EINVAL;
    t->w = calloc((size_t)n * (size_t)n, sizeof *t->w);
    if (t->w == NULL)
        return KVS_ENOMEM;
    t->n = n;
    return 0;
}

void tree_topo_fini(tree_topo *t)
{
    if (t == NULL)
        return;
    free(t->w);
    t->w = NULL;
    t->n = 0;
}

void tree_topo_list_free(tree_topo *list, int count)
{
    if (list == NULL)
        return;
    for (int i = 0; i < count; i++)
        tree_topo_fini(&list[i]);
    free(list);
}

/* ------------------------------------------------------------ matrix string */

int tree_topo_parse(const char *s, const char *what, tree_topo *t, char *err, size_t errlen)
{
    double vals[TREE_MAX_N * TREE_MAX_N];
    int rows = 0, cols = -1, col = 0, rc;
    const char *p = s;
    memset(t, 0, sizeof *t);
    if (s == NULL || *s == '\0') {
        snprintf(err, errlen, "%s: empty matrix", what);
        return KVS_EINVAL;
    }
    for (;;) {
        char *end;
        double v;
        while (*p == ' ' || *p == '\t')
            p++;
        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno != 0 || !isfinite(v) || v < 0) {
            snprintf(err, errlen,
                     "%s='%s': expected rows of non-negative numbers separated by ',' and rows "
                     "separated by ';' (e.g. \"0,2;2,0\"), bad value at row %d column %d",
                     what, s, rows, col);
            return KVS_EINVAL;
        }
        if (col >= TREE_MAX_N || rows >= TREE_MAX_N) {
            snprintf(err, errlen, "%s: more than %d GPUs", what, TREE_MAX_N);
            return KVS_EINVAL;
        }
        vals[rows * TREE_MAX_N + col++] = v;
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != ';' && *p != '\0') {
            snprintf(err, errlen, "%s='%s': unexpected '%c' at row %d (use ',' and ';')", what,
                     s, *p, rows);
            return KVS_EINVAL;
        }
        if (cols < 0)
            cols = col;
        if (col != cols) {
            snprintf(err, errlen, "%s: row %d has %d values, row 0 has %d", what, rows, col,
                     cols);
            return KVS_EINVAL;
        }
        rows++;
        col = 0;
        if (*p == '\0')
            break;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break; /* a trailing ';' is fine */
    }
    if (rows != cols) {
        snprintf(err, errlen, "%s: matrix is %d x %d, must be square", what, rows, cols);
        return KVS_EINVAL;
    }
    rc = tree_topo_init(t, rows);
    if (rc != 0) {
        snprintf(err, errlen, "%s: out of memory", what);
        return rc;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < rows; j++)
            t->w[i * rows + j] = i == j ? 0.0 : vals[i * TREE_MAX_N + j];
    return 0;
}

int tree_topo_from_env(tree_topo *t, bool *found, char *err, size_t errlen)
{
    const char *v = getenv("KVS_TOPOLOGY");
    int rc;
    *found = false;
    if (v == NULL || *v == '\0')
        return 0;
    rc = tree_topo_parse(v, "KVS_TOPOLOGY", t, err, errlen);
    if (rc != 0)
        return rc == KVS_ENOMEM ? rc : KVS_ECONFIG;
    snprintf(t->name, sizeof t->name, "KVS_TOPOLOGY");
    *found = true;
    return 0;
}

/* -------------------------------------------------------------------- JSON */

static int topo_from_json(const tj_val *v, int idx, const char *what, tree_topo *t, char *err,
                          size_t errlen)
{
    const tj_val *name = tj_get(v, "name"), *nv = tj_get(v, "n"), *wv = tj_get(v, "weights");
    int n;
    if (v->type != TJ_OBJ) {
        snprintf(err, errlen, "%s: topologies[%d] is not an object", what, idx);
        return KVS_EINVAL;
    }
    if (name != NULL && name->type != TJ_STR) {
        snprintf(err, errlen, "%s: topologies[%d].name is not a string", what, idx);
        return KVS_EINVAL;
    }
    if (name != NULL && (name->len >= TREE_NAME_MAX || strlen(name->str) != name->len)) {
        snprintf(err, errlen, "%s: topologies[%d].name is longer than %d bytes or holds NUL",
                 what, idx, TREE_NAME_MAX - 1);
        return KVS_EINVAL;
    }
    if (wv == NULL || wv->type != TJ_ARR) {
        snprintf(err, errlen, "%s: topologies[%d].weights missing or not an array", what, idx);
        return KVS_EINVAL;
    }
    n = (int)(wv->len <= TREE_MAX_N ? wv->len : TREE_MAX_N + 1);
    if (nv != NULL) {
        if (nv->type != TJ_NUM || nv->num != floor(nv->num) || nv->num < 1 ||
            nv->num > TREE_MAX_N) {
            snprintf(err, errlen, "%s: topologies[%d].n must be an integer in [1, %d]", what,
                     idx, TREE_MAX_N);
            return KVS_EINVAL;
        }
        if ((size_t)nv->num != wv->len) {
            snprintf(err, errlen, "%s: topologies[%d]: n = %d but weights has %zu rows", what,
                     idx, (int)nv->num, wv->len);
            return KVS_EINVAL;
        }
    }
    if (n < 1 || n > TREE_MAX_N) {
        snprintf(err, errlen, "%s: topologies[%d]: %zu GPUs, allowed 1..%d", what, idx, wv->len,
                 TREE_MAX_N);
        return KVS_EINVAL;
    }
    if (tree_topo_init(t, n) != 0) {
        snprintf(err, errlen, "%s: out of memory", what);
        return KVS_ENOMEM;
    }
    if (name != NULL)
        memcpy(t->name, name->str, name->len + 1);
    for (int i = 0; i < n; i++) {
        const tj_val *row = &wv->items[i];
        if (row->type != TJ_ARR || row->len != (size_t)n) {
            snprintf(err, errlen, "%s: topologies[%d].weights[%d] is not an array of %d numbers",
                     what, idx, i, n);
            tree_topo_fini(t);
            return KVS_EINVAL;
        }
        for (int j = 0; j < n; j++) {
            const tj_val *x = &row->items[j];
            if (x->type != TJ_NUM || !(x->num >= 0)) {
                snprintf(err, errlen,
                         "%s: topologies[%d].weights[%d][%d] must be a number >= 0", what, idx,
                         i, j);
                tree_topo_fini(t);
                return KVS_EINVAL;
            }
            t->w[i * n + j] = i == j ? 0.0 : x->num;
        }
    }
    return 0;
}

int tree_topo_parse_json(const char *text, size_t len, const char *what, tree_topo **list,
                         int *count, char *err, size_t errlen)
{
    tj_val *root = NULL;
    const tj_val *arr;
    tree_topo *out = NULL;
    int rc, k = 0;
    *list = NULL;
    *count = 0;
    rc = tj_parse(text, len, what, &root, err, errlen);
    if (rc != 0)
        return rc;
    arr = tj_get(root, "topologies");
    if (arr == NULL || arr->type != TJ_ARR) {
        snprintf(err, errlen, "%s: expected {\"topologies\": [...]}", what);
        rc = KVS_EINVAL;
        goto out;
    }
    if (arr->len > 1000000) {
        snprintf(err, errlen, "%s: too many topologies", what);
        rc = KVS_ETOOBIG;
        goto out;
    }
    out = calloc(arr->len ? arr->len : 1, sizeof *out);
    if (out == NULL) {
        rc = KVS_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", what);
        goto out;
    }
    for (k = 0; k < (int)arr->len; k++) {
        rc = topo_from_json(&arr->items[k], k, what, &out[k], err, errlen);
        if (rc != 0)
            goto out;
    }
    *list = out;
    *count = k;
    out = NULL;
out:
    tree_topo_list_free(out, k);
    tj_free(root);
    return rc;
}

int tree_topo_load_json(const char *path, tree_topo **list, int *count, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = tj_read_file(path, &text, &len, err, errlen);
    if (rc != 0)
        return rc;
    rc = tree_topo_parse_json(text, len, path, list, count, err, errlen);
    free(text);
    return rc;
}

/* ---------------------------------------------------------- CUDA adjustment */

static bool reach_all(int n, const int *adj)
{
    int stack[TREE_MAX_N], top = 0, seen = 1;
    bool vis[TREE_MAX_N] = {true};
    stack[top++] = 0;
    while (top > 0) {
        int u = stack[--top];
        for (int v = 0; v < n; v++)
            if (!vis[v] && adj[u * n + v] && adj[v * n + u]) {
                vis[v] = true;
                seen++;
                stack[top++] = v;
            }
    }
    return seen == n;
}

int tree_topo_from_ranks(int n, const int *rank, tree_topo *t)
{
    int adj[TREE_MAX_N * TREE_MAX_N];
    bool nvl_connected;
    int rc = tree_topo_init(t, n);
    if (rc != 0)
        return rc;
    for (int i = 0; i < n * n; i++)
        adj[i] = rank[i] > 1;
    nvl_connected = reach_all(n, adj);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int r = rank[i * n + j];
            if (i == j || r <= 0)
                continue;
            t->w[i * n + j] = r > 1 ? (double)r : (nvl_connected ? 0.0 : 1.0 / n);
        }
    return 0;
}

/* ------------------------------------------------------------ connectivity */

int tree_topo_check_connected(const tree_topo *t, char *err, size_t errlen)
{
    int stack[TREE_MAX_N], top = 0, seen = 1, n = t->n;
    bool vis[TREE_MAX_N] = {true};
    size_t off;
    stack[top++] = 0;
    while (top > 0) {
        int u = stack[--top];
        for (int v = 0; v < n; v++)
            if (!vis[v] && tree_link(t, u, v)) {
                vis[v] = true;
                seen++;
                stack[top++] = v;
            }
    }
    if (seen == n)
        return 0;
    off = (size_t)snprintf(err, errlen, "link graph is disconnected: GPU%s ",
                           n - seen > 1 ? "s" : "");
    for (int v = 0, k = 0; v < n; v++) {
        if (vis[v])
            continue;
        if (off < errlen)
            off += (size_t)snprintf(err + off, errlen - off, "%s%d", k++ ? ", " : "", v);
    }
    if (off < errlen)
        snprintf(err + off, errlen - off, " cannot be reached from GPU 0");
    return KVS_EINVAL;
}

void tree_topo_print(const tree_topo *t, void *file)
{
    FILE *f = file;
    fprintf(f, "link matrix (%d GPUs%s%s):\n", t->n, t->name[0] ? ", " : "", t->name);
    for (int i = 0; i < t->n; i++) {
        for (int j = 0; j < t->n; j++)
            fprintf(f, "%s%g", j ? " " : "  ", tree_w(t, i, j));
        fputc('\n', f);
    }
}

/* ------------------------------------------------------------------ options */

void tree_opts_default(tree_opts *o)
{
    o->mode = TREE_MODE_KL;
    o->penalty = 0.7;
    o->log = false;
    o->array_bound = 10000000;
    o->gpu_p2p = true;
    o->optimize = true;
    o->effort = 100;
    o->depth_slack = 1;
}

int tree_opts_from_env(tree_opts *o, char *err, size_t errlen)
{
    bool bt;
    int rc;
    tree_opts_default(o);
    if ((rc = cfg_get_bool("MXNET_KVSTORE_TREE_BACKTRACK", false, &bt, err, errlen)) != 0)
        return rc;
    o->mode = bt ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
    if ((rc = cfg_get_double("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", 0.7, 1e-6, 1.0,
                             &o->penalty, err, errlen)) != 0)
        return rc;
    if ((rc = cfg_get_bool("MXNET_KVSTORE_LOGTREE", false, &o->log, err, errlen)) != 0)
        return rc;
    if ((rc = cfg_get_u64("MXNET_KVSTORE_TREE_ARRAY_BOUND", 10000000, 1, UINT64_MAX,
                          &o->array_bound, err, errlen)) != 0)
        return rc;
    if ((rc = cfg_get_bool("MXNET_ENABLE_GPU_P2P", true, &o->gpu_p2p, err, errlen)) != 0)
        return rc;
    if ((rc = cfg_get_bool("KVS_TREE_OPTIMIZE", true, &o->optimize, err, errlen)) != 0)
        return rc;
    if ((rc = cfg_get_u64("KVS_TREE_EFFORT", 100, 0, 10000, &o->effort, err, errlen)) != 0)
        return rc;
    long long slack;
    if ((rc = cfg_get_int("KVS_TREE_DEPTH_SLACK", 1, 0, 1, &slack, err, errlen)) != 0)
        return rc;
    o->depth_slack = (int)slack;
    return 0;
}

int tree_env_check(char *err, size_t errlen)
{
    tree_opts o;
    tree_topo t = {0};
    bool found;
    int rc = tree_opts_from_env(&o, err, errlen);
    if (rc == 0)
        rc = tree_topo_from_env(&t, &found, err, errlen);
    tree_topo_fini(&t);
    return rc;
}
