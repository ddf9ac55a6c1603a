/* smi.c - link matrices from text: `nvidia-smi topo -m` output and matrix
 * files, and the KVS_TOPOLOGY string of a matrix. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define SMI_MAX_TEXT (4u << 20)   /* bytes read from a topology file */
#define SMI_MAX_TOK 64            /* tokens per line we look at */

/* One line without ANSI escape sequences (ESC [ ... final byte), as
 * nvidia-smi prints them on a terminal (underlined headers). */
static size_t clean_line(const char *s, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < cap; i++) {
        if (s[i] == '\x1b') {
            if (i + 1 < len && s[i + 1] == '[') {
                i += 2;
                while (i < len && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
                    i++;
            }
            continue;
        }
        if (s[i] == '\r')
            continue;
        out[k++] = s[i];
    }
    out[k] = '\0';
    return k;
}

/* Split on blanks (spaces, tabs): at most SMI_MAX_TOK tokens, in place. */
static int split(char *s, char **tok)
{
    int n = 0;
    for (char *p = s; *p && n < SMI_MAX_TOK;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        tok[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

/* "GPU<k>" -> k, else -1. */
static int gpu_index(const char *s)
{
    char *end;
    long k;
    if (strncmp(s, "GPU", 3) != 0 || !isdigit((unsigned char)s[3]))
        return -1;
    errno = 0;
    k = strtol(s + 3, &end, 10);
    return *end == '\0' && errno == 0 && k < TREE_MAX_N ? (int)k : -1;
}

int tree_topo_parse_smi(const char *text, size_t len, const char *what, tree_topo *t, char *err,
                        size_t errlen)
{
    char line[4096], *tok[SMI_MAX_TOK];
    int n = 0, lineno = 0, rows = 0, rc;
    bool seen[TREE_MAX_N] = {false}, header = false;
    int nv[TREE_MAX_N * TREE_MAX_N] = {0}; /* 1 + NVLink count, 1 PCIe, 0 none */
    size_t pos = 0;
    memset(t, 0, sizeof *t);
    while (pos < len) {
        size_t e = pos;
        int nt;
        while (e < len && text[e] != '\n')
            e++;
        lineno++;
        clean_line(text + pos, e - pos, line, sizeof line);
        pos = e + 1;
        nt = split(line, tok);
        if (!header) {
            /* the header: GPU0 GPU1 ... (then NICs, affinity columns) */
            if (nt > 0 && gpu_index(tok[0]) == 0 && (nt == 1 || strcmp(tok[1], "X") != 0)) {
                while (n < nt && gpu_index(tok[n]) == n)
                    n++;
                header = true;
            }
            continue;
        }
        if (nt == 0 || strncmp(tok[0], "Legend", 6) == 0) {
            if (rows > 0)
                break;
            continue;
        }
        int i = gpu_index(tok[0]);
        if (i < 0)
            continue; /* NIC rows (mlx5_0, NIC0) */
        if (i >= n) {
            snprintf(err, errlen, "%s: line %d: row %s but the header names GPU0..GPU%d", what,
                     lineno, tok[0], n - 1);
            return KVS_EINVAL;
        }
        if (seen[i]) {
            snprintf(err, errlen, "%s: line %d: row GPU%d appears twice", what, lineno, i);
            return KVS_EINVAL;
        }
        if (nt < n + 1) {
            snprintf(err, errlen, "%s: line %d (row GPU%d): %d entries, expected %d (one per GPU)",
                     what, lineno, i, nt - 1, n);
            return KVS_EINVAL;
        }
        seen[i] = true;
        rows++;
        for (int j = 0; j < n; j++) {
            const char *x = tok[1 + j];
            int v = -1;
            if (i == j) {
                if (strcmp(x, "X") != 0) {
                    snprintf(err, errlen,
                             "%s: line %d (row GPU%d), column GPU%d: '%.16s': expected X on the "
                             "diagonal",
                             what, lineno, i, j, x);
                    return KVS_EINVAL;
                }
                continue;
            }
            if (!strcmp(x, "PIX") || !strcmp(x, "PXB") || !strcmp(x, "PHB") ||
                !strcmp(x, "NODE") || !strcmp(x, "SYS") || !strcmp(x, "SOC")) {
                v = 1;
            } else if (!strncmp(x, "NV", 2) && isdigit((unsigned char)x[2])) {
                char *end;
                long k = strtol(x + 2, &end, 10);
                if (*end == '\0' && k >= 1 && k <= 1000)
                    v = 1 + (int)k;
            }
            if (v < 0) {
                snprintf(err, errlen,
                         "%s: line %d (row GPU%d), column GPU%d: '%.16s': expected NV<links>, "
                         "PIX, PXB, PHB, NODE or SYS",
                         what, lineno, i, j, x);
                return KVS_EINVAL;
            }
            nv[i * TREE_MAX_N + j] = v;
        }
    }
    if (!header || n == 0) {
        snprintf(err, errlen,
                 "%s: no header line with GPU0 GPU1 ... (expected `nvidia-smi topo -m` output)",
                 what);
        return KVS_EINVAL;
    }
    for (int i = 0; i < n; i++)
        if (!seen[i]) {
            snprintf(err, errlen, "%s: no row for GPU%d (the header names GPU0..GPU%d)", what, i,
                     n - 1);
            return KVS_EINVAL;
        }
    if ((rc = tree_topo_init(t, n)) != 0) {
        snprintf(err, errlen, "%s: out of memory", what);
        return rc;
    }
    /* MXNet's rule: PCIe pairs drop out when the NVLink graph alone is
     * connected */
    {
        bool reach[TREE_MAX_N] = {true};
        int stack[TREE_MAX_N], top = 0, seen_n = 1;
        stack[top++] = 0;
        while (top > 0) {
            int u = stack[--top];
            for (int v = 0; v < n; v++)
                if (!reach[v] && nv[u * TREE_MAX_N + v] > 1 && nv[v * TREE_MAX_N + u] > 1) {
                    reach[v] = true;
                    seen_n++;
                    stack[top++] = v;
                }
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int v = nv[i * TREE_MAX_N + j];
                t->w[i * n + j] = v == 1 && seen_n == n ? 0 : v;
            }
    }
    return 0;
}

int tree_topo_load_file(const char *path, const char *what, tree_topo *t, char *err,
                        size_t errlen)
{
    FILE *f;
    char *text, lbl[TREE_NAME_MAX + 64];
    size_t len = 0;
    int rc;
    memset(t, 0, sizeof *t);
    snprintf(lbl, sizeof lbl, "%s%s%.*s", what ? what : "", what ? "=@" : "", 100, path);
    if ((f = fopen(path, "rb")) == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", lbl, strerror(errno));
        return KVS_EINVAL;
    }
    text = malloc(SMI_MAX_TEXT + 1);
    if (text == NULL) {
        fclose(f);
        snprintf(err, errlen, "%s: out of memory", lbl);
        return KVS_ENOMEM;
    }
    len = fread(text, 1, SMI_MAX_TEXT + 1, f);
    if (ferror(f) || len > SMI_MAX_TEXT) {
        snprintf(err, errlen, "%s: %s", lbl,
                 ferror(f) ? "read error" : "longer than 4 MiB, not a topology");
        fclose(f);
        free(text);
        return KVS_EINVAL;
    }
    fclose(f);
    text[len] = '\0';
    if (strlen(text) != len) {
        snprintf(err, errlen, "%s: contains a NUL byte, not a topology", lbl);
        free(text);
        return KVS_EINVAL;
    }
    if (strstr(text, "GPU0") != NULL) {
        rc = tree_topo_parse_smi(text, len, lbl, t, err, errlen);
    } else {
        /* a matrix: rows separated by ';' or line breaks */
        char *m = malloc(len + 1), *q = m;
        if (m == NULL) {
            free(text);
            snprintf(err, errlen, "%s: out of memory", lbl);
            return KVS_ENOMEM;
        }
        for (size_t i = 0; i < len; i++) {
            char c = text[i];
            if (c == '\r')
                continue;
            if (c == '\n') {
                if (q > m && q[-1] != ';')
                    *q++ = ';';
                continue;
            }
            *q++ = c;
        }
        *q = '\0';
        rc = tree_topo_parse(m, lbl, t, err, errlen);
        free(m);
    }
    free(text);
    if (rc == 0)
        snprintf(t->name, sizeof t->name, "%.*s", TREE_NAME_MAX - 1, path);
    return rc;
}

size_t tree_topo_format(const tree_topo *t, char *buf, size_t len)
{
    size_t k = 0;
    for (int i = 0; i < t->n; i++)
        for (int j = 0; j < t->n; j++) {
            char tmp[40];
            int m = snprintf(tmp, sizeof tmp, "%s%.17g", j ? "," : (i ? ";" : ""),
                             tree_w(t, i, j));
            if (buf != NULL && k + (size_t)m < len)
                memcpy(buf + k, tmp, (size_t)m);
            k += (size_t)m;
        }
    if (buf != NULL && len > 0)
        buf[k < len ? k : len - 1] = '\0';
    return k;
}

/* KVS_TOPOLOGY's text: a matrix, or "@FILE" (a matrix or `nvidia-smi topo
 * -m` text).  Here rather than in topo.c so that topo.c never calls this
 * file back. */
int tree_topo_from_spec(const char *spec, tree_topo *t, bool *found, char *err, size_t errlen)
{
    int rc;
    *found = false;
    if (spec == NULL || *spec == '\0')
        return 0;
    if (spec[0] == '@')
        rc = tree_topo_load_file(spec + 1, "KVS_TOPOLOGY", t, err, errlen);
    else
        rc = tree_topo_parse(spec, "KVS_TOPOLOGY", t, err, errlen);
    if (rc != 0)
        return rc == KVS_ENOMEM ? rc : KVS_ECONFIG;
    snprintf(t->name, sizeof t->name, "KVS_TOPOLOGY");
    *found = true;
    return 0;
}

int tree_topo_check(const char *spec, char *err, size_t errlen)
{
    tree_topo t = {0};
    bool found;
    int rc = tree_topo_from_spec(spec, &t, &found, err, errlen);
    tree_topo_fini(&t);
    return rc;
}
