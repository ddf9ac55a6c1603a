/* json.c - a small, strict, bounds-checked JSON reader for tree/ inputs. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tree/json.h"

typedef struct tj_parser {
    const char *s;
    size_t len, pos;
    const char *what;
    char *err;
    size_t errlen;
    int rc;
} tj_parser;

static int tj_fail(tj_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int tj_fail(tj_parser *p, const char *fmt, ...)
{
    size_t line = 1, col = 1;
    char msg[200];
    va_list ap;
    if (p->rc != 0)
        return p->rc;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err != NULL && p->errlen > 0)
        snprintf(p->err, p->errlen, "%s:%zu:%zu: %s", p->what, line, col, msg);
    p->rc = KVS_EINVAL;
    return p->rc;
}

static int tj_oom(tj_parser *p)
{
    if (p->rc == 0) {
        if (p->err != NULL && p->errlen > 0)
            snprintf(p->err, p->errlen, "%s: out of memory", p->what);
        p->rc = KVS_ENOMEM;
    }
    return p->rc;
}

static void tj_ws(tj_parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static void tj_clear(tj_val *v)
{
    if (v == NULL)
        return;
    if (v->type == TJ_ARR || v->type == TJ_OBJ) {
        for (size_t i = 0; i < v->len; i++) {
            tj_clear(&v->items[i]);
            if (v->keys != NULL)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    free(v->str);
    memset(v, 0, sizeof *v);
}

void tj_free(tj_val *v)
{
    tj_clear(v);
    free(v);
}

static int tj_hex4(tj_parser *p, unsigned *out)
{
    unsigned v = 0;
    if (p->len - p->pos < 4)
        return tj_fail(p, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return tj_fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

static size_t tj_utf8(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote.  An escape never produces more bytes than it takes,
 * so the output fits in the raw span. */
static int tj_string(tj_parser *p, char **out, size_t *outlen)
{
    size_t start = ++p->pos, n = 0;
    char *o;
    while (p->pos < p->len && p->s[p->pos] != '"') {
        if (p->s[p->pos] == '\\')
            p->pos++;
        p->pos++;
    }
    if (p->pos >= p->len)
        return tj_fail(p, "unterminated string");
    o = malloc(p->pos - start + 1);
    if (o == NULL)
        return tj_oom(p);
    p->pos = start;
    while (p->s[p->pos] != '"') {
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c < 0x20) {
            p->pos--;
            free(o);
            return tj_fail(p, "control character in string");
        }
        if (c != '\\') {
            o[n++] = (char)c;
            continue;
        }
        c = (unsigned char)p->s[p->pos++];
        switch (c) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (tj_hex4(p, &cp) != 0)
                goto bad;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->len - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    tj_fail(p, "unpaired surrogate in \\u escape");
                    goto bad;
                }
                p->pos += 2;
                if (tj_hex4(p, &lo) != 0)
                    goto bad;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    tj_fail(p, "unpaired surrogate in \\u escape");
                    goto bad;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                tj_fail(p, "unpaired surrogate in \\u escape");
                goto bad;
            }
            n += tj_utf8(cp, o + n);
            break;
        }
        default:
            p->pos--;
            tj_fail(p, "bad escape '\\%c'", c >= 0x20 && c < 0x7f ? c : '?');
            goto bad;
        }
    }
    p->pos++;
    o[n] = '\0';
    *out = o;
    *outlen = n;
    return 0;
bad:
    free(o);
    return p->rc;
}

static int tj_number(tj_parser *p, double *out)
{
    size_t start = p->pos;
    char buf[64], *end;
    const char *s = p->s;
    if (p->pos < p->len && s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
        return tj_fail(p, "bad number");
    if (s[p->pos] == '0')
        p->pos++;
    else
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    if (p->pos < p->len && s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return tj_fail(p, "bad number: digit expected after '.'");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return tj_fail(p, "bad number: digit expected in exponent");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos - start >= sizeof buf) {
        p->pos = start;
        return tj_fail(p, "number too long");
    }
    memcpy(buf, s + start, p->pos - start);
    buf[p->pos - start] = '\0';
    errno = 0;
    *out = strtod(buf, &end);
    if (!isfinite(*out)) {
        p->pos = start;
        return tj_fail(p, "number out of range");
    }
    return 0;
}

static int tj_value(tj_parser *p, tj_val *v, int depth);

static int tj_push(tj_parser *p, tj_val *v, size_t *cap, bool keys)
{
    if (v->len < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    tj_val *items = realloc(v->items, nc * sizeof *items);
    if (items == NULL)
        return tj_oom(p);
    v->items = items;
    if (keys) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (k == NULL)
            return tj_oom(p);
        v->keys = k;
    }
    *cap = nc;
    return 0;
}

static int tj_container(tj_parser *p, tj_val *v, int depth, bool obj)
{
    size_t cap = 0;
    char close = obj ? '}' : ']';
    v->type = obj ? TJ_OBJ : TJ_ARR;
    if (depth >= TJ_MAX_DEPTH)
        return tj_fail(p, "nesting deeper than %d", TJ_MAX_DEPTH);
    p->pos++;
    tj_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (tj_push(p, v, &cap, obj) != 0)
            return p->rc;
        tj_val *it = &v->items[v->len];
        memset(it, 0, sizeof *it);
        if (obj) {
            size_t kl;
            tj_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return tj_fail(p, "object key (a string) expected");
            v->keys[v->len] = NULL;
            if (tj_string(p, &v->keys[v->len], &kl) != 0)
                return p->rc;
            v->len++; /* owned from here on, even if the value fails */
            tj_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return tj_fail(p, "':' expected after object key");
            p->pos++;
            if (tj_value(p, it, depth + 1) != 0)
                return p->rc;
        } else {
            v->len++;
            if (tj_value(p, it, depth + 1) != 0)
                return p->rc;
        }
        tj_ws(p);
        if (p->pos >= p->len)
            return tj_fail(p, "unexpected end of input, '%c' expected", close);
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        return tj_fail(p, "',' or '%c' expected", close);
    }
}

static int tj_word(tj_parser *p, const char *w, tj_val *v, tj_type t)
{
    size_t l = strlen(w);
    if (p->len - p->pos < l || memcmp(p->s + p->pos, w, l) != 0)
        return tj_fail(p, "unexpected character");
    p->pos += l;
    v->type = t;
    return 0;
}

static int tj_value(tj_parser *p, tj_val *v, int depth)
{
    tj_ws(p);
    if (p->pos >= p->len)
        return tj_fail(p, "unexpected end of input, value expected");
    switch (p->s[p->pos]) {
    case '{': return tj_container(p, v, depth, true);
    case '[': return tj_container(p, v, depth, false);
    case '"':
        v->type = TJ_STR;
        return tj_string(p, &v->str, &v->len);
    case 't': return tj_word(p, "true", v, TJ_TRUE);
    case 'f': return tj_word(p, "false", v, TJ_FALSE);
    case 'n': return tj_word(p, "null", v, TJ_NULL);
    default:
        v->type = TJ_NUM;
        return tj_number(p, &v->num);
    }
}

int tj_parse(const char *text, size_t len, const char *what, tj_val **out, char *err,
             size_t errlen)
{
    tj_parser p = {text, len, 0, what != NULL ? what : "json", err, errlen, 0};
    tj_val *v;
    *out = NULL;
    if (len > TJ_MAX_INPUT)
        return tj_fail(&p, "input larger than %u bytes", TJ_MAX_INPUT);
    v = calloc(1, sizeof *v);
    if (v == NULL)
        return tj_oom(&p);
    if (tj_value(&p, v, 0) == 0) {
        tj_ws(&p);
        if (p.pos != p.len)
            tj_fail(&p, "trailing characters after the value");
    }
    if (p.rc != 0) {
        tj_free(v);
        return p.rc;
    }
    *out = v;
    return 0;
}

const tj_val *tj_get(const tj_val *v, const char *key)
{
    if (v == NULL || v->type != TJ_OBJ)
        return NULL;
    for (size_t i = 0; i < v->len; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

int tj_read_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf = NULL;
    int rc = KVS_EINVAL;
    *text = NULL;
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return KVS_EINVAL;
    }
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > TJ_MAX_INPUT) {
        snprintf(err, errlen, "%s: larger than %u bytes", path, TJ_MAX_INPUT);
        rc = KVS_ETOOBIG;
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = KVS_ENOMEM;
        goto out;
    }
    if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf);
        buf = NULL;
        goto out;
    }
    buf[st.st_size] = '\0';
    *text = buf;
    *len = (size_t)st.st_size;
    rc = 0;
out:
    fclose(f);
    return rc;
}

void tj_print_str(void *file, const char *s)
{
    FILE *f = file;
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}
