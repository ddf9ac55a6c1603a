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
                     "%s: row %d, column %d: '%.*s': expected a non-negative number (weights "
                     "separated by ',', rows by ';', e.g. \"0,2;2,0\"; or @FILE)",
                     what, rows, col, (int)(strcspn(p, ",;") < 16 ? strcspn(p, ",;") : 16), p);
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
            snprintf(err, errlen,
                     "%s: row %d, column %d: unexpected '%c' after a number (use ',' between "
                     "weights and ';' between rows)",
                     what, rows, col - 1, *p);
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
    o->weighted = true;
    o->max_trees = 0;
    o->min_slice = 262144;
}

void tree_opts_from_cfg(tree_opts *o, const struct cfg *c)
{
    tree_opts_default(o);
    o->mode = c->tree_backtrack ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
    o->penalty = c->tree_penalty;
    o->log = c->tree_log;
    o->array_bound = c->tree_array_bound;
    o->gpu_p2p = c->gpu_p2p;
    o->optimize = c->tree_optimize;
    o->effort = c->tree_effort;
    o->depth_slack = c->tree_depth_slack;
    o->weighted = c->tree_weighted;
    o->max_trees = c->tree_max_trees;
    o->min_slice = c->tree_min_slice;
}
