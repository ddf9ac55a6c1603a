/* http.c - see http.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "kvs.h"
#include "net/http.h"

/* ---- the parser (pure) ---- */

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* One line [p, e) without its line end. */
static int parse_request_line(const char *p, const char *e, char *method, size_t mlen,
                              char *path, size_t plen)
{
    const char *m = p;
    while (p < e && *p >= 'A' && *p <= 'Z')
        p++;
    size_t ml = (size_t)(p - m);
    if (ml == 0 || ml > 16 || p >= e || *p != ' ')
        return -400;
    p++;
    const char *u = p;
    while (p < e && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f)
        p++;
    size_t ul = (size_t)(p - u);
    if (ul == 0 || p >= e || *p != ' ')
        return -400;
    if (ul >= plen)
        return -414;
    p++;
    size_t vl = (size_t)(e - p);
    if (vl != 8 || memcmp(p, "HTTP/", 5) != 0)
        return -400;
    if (p[5] != '1' || p[6] != '.' || (p[7] != '0' && p[7] != '1'))
        return -505;
    snprintf(method, mlen, "%.*s", (int)ml, m);
    snprintf(path, plen, "%.*s", (int)ul, u);
    return 0;
}

static int parse_header_line(const char *p, const char *e)
{
    const char *n = p;
    while (p < e && is_tchar((unsigned char)*p))
        p++;
    if (p == n || p >= e || *p != ':')
        return -400; /* no name, a space before ':', or obsolete folding */
    for (p++; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return -400;
    }
    return 0;
}

int http_parse_head(const char *buf, size_t len, char *method, size_t mlen, char *path,
                    size_t plen)
{
    size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
    const char *p = buf, *end = buf + lim;
    bool first = true;
    if (mlen)
        method[0] = '\0';
    if (plen)
        path[0] = '\0';
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        const char *e = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (memchr(p, '\0', (size_t)(e - p)) || memchr(p, '\r', (size_t)(e - p)))
            return -400;
        if (e == p) {
            if (first)
                return -400; /* an empty request line */
            return (int)(nl + 1 - buf);
        }
        int rc = first ? parse_request_line(p, e, method, mlen, path, plen)
                       : parse_header_line(p, e);
        if (rc)
            return rc;
        first = false;
        p = nl + 1;
    }
    if (memchr(p, '\0', (size_t)(end - p)))
        return -400;
    return len >= HTTP_MAX_HEAD ? -431 : 0;
}

/* ---- the responder ---- */

typedef struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    net_http *h;
    struct http_conn *next, *prev;
    char head[HTTP_MAX_HEAD];
    size_t used;
    char *reply;
    bool replying, closing;
    int open; /* handles not yet closed */
} http_conn;

struct net_http {
    uv_tcp_t listen;
    net_http_fn fn;
    void *arg;
    int port;
    int nconns;
    http_conn *conns;
    bool closing;
    unsigned long long served, rejected;
};

static void conn_closed(uv_handle_t *hd)
{
    http_conn *c = hd->data;
    if (--c->open > 0)
        return;
    free(c->reply);
    free(c);
}

static void conn_close(http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    net_http *h = c->h;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->nconns--;
    uv_close((uv_handle_t *)&c->timer, conn_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    conn_close(w->data);
}

static void reply(http_conn *c, int code, const char *ctype, const char *body, size_t blen,
                  bool head_only)
{
    static const char *const reasons[][2] = {
        {"200", "OK"}, {"400", "Bad Request"}, {"404", "Not Found"},
        {"405", "Method Not Allowed"}, {"414", "URI Too Long"},
        {"431", "Request Header Fields Too Large"}, {"503", "Service Unavailable"},
        {"505", "HTTP Version Not Supported"}};
    char codes[16];
    const char *reason = "Error";
    snprintf(codes, sizeof codes, "%d", code);
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (!strcmp(reasons[i][0], codes))
            reason = reasons[i][1];
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n%s\r\n",
                      code, reason, ctype, blen, code == 405 ? "Allow: GET, HEAD\r\n" : "");
    size_t total = (size_t)hl + (head_only ? 0 : blen);
    free(c->reply);
    c->reply = malloc(total ? total : 1);
    if (c->reply == NULL) {
        conn_close(c);
        return;
    }
    memcpy(c->reply, hdr, (size_t)hl);
    if (!head_only && blen)
        memcpy(c->reply + hl, body, blen);
    c->replying = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_buf_t b = uv_buf_init(c->reply, (unsigned)total);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        conn_close(c);
}

static void reply_text(http_conn *c, int code, const char *text)
{
    c->h->rejected += code >= 400;
    reply(c, code, "text/plain; charset=utf-8", text, strlen(text), false);
}

static void handle(http_conn *c, const char *method, const char *path)
{
    bool head = !strcmp(method, "HEAD");
    if (strcmp(method, "GET") != 0 && !head) {
        reply_text(c, 405, "only GET and HEAD\n");
        return;
    }
    size_t plen = strcspn(path, "?");
    if (!(plen == 8 && !memcmp(path, "/metrics", 8)) && !(plen == 1 && path[0] == '/')) {
        reply_text(c, 404, "not found: try /metrics\n");
        return;
    }
    if (plen == 1) {
        static const char idx[] = "kvsd: metrics at /metrics\n";
        reply(c, 200, "text/plain; charset=utf-8", idx, sizeof idx - 1, head);
        c->h->served++;
        return;
    }
    size_t len = 0;
    char *text = c->h->fn(c->h->arg, &len);
    if (text == NULL) {
        reply_text(c, 503, "metrics unavailable (out of memory)\n");
        return;
    }
    reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, head);
    free(text);
    c->h->served++;
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    http_conn *c = hd->data;
    (void)suggested;
    *buf = uv_buf_init(c->head + c->used, (unsigned)(sizeof c->head - c->used));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    http_conn *c = st->data;
    char method[20], path[256];
    (void)buf;
    if (c->replying || c->closing)
        return;
    if (n < 0) { /* EOF or error before a whole head */
        c->h->rejected++;
        conn_close(c);
        return;
    }
    c->used += (size_t)n;
    int rc = http_parse_head(c->head, c->used, method, sizeof method, path, sizeof path);
    if (rc == 0 && c->used < sizeof c->head)
        return; /* read more */
    if (rc == 0)
        rc = -431;
    if (rc < 0) {
        reply_text(c, -rc, "bad request\n");
        return;
    }
    handle(c, method, path);
}

static void on_timeout(uv_timer_t *t)
{
    http_conn *c = t->data;
    c->h->rejected++;
    conn_close(c); /* slow client: its write, if any, is cancelled by the close */
}

static void on_conn(uv_stream_t *ls, int status)
{
    net_http *h = ls->data;
    if (status < 0)
        return;
    http_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return; /* out of memory: the connection waits in the backlog */
    c->h = h;
    uv_tcp_init(ls->loop, &c->tcp);
    uv_timer_init(ls->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open = 2;
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    h->nconns++;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) != 0) {
        h->rejected++;
        conn_close(c);
        return;
    }
    if (h->nconns > HTTP_MAX_CONNS) {
        /* full: drop the oldest connection (idle clients cannot lock out a
         * scraper; they only lose their own slot) */
        http_conn *old = c, *tail;
        while (old->next)
            old = old->next;
        tail = old;
        while (old != c && old->replying) /* prefer one still sending its request */
            old = old->prev;
        if (old == c)
            old = tail;
        h->rejected++;
        conn_close(old);
    }
    uv_timer_start(&c->timer, on_timeout, HTTP_TIMEOUT_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        conn_close(c);
}

static void listen_closed(uv_handle_t *hd)
{
    free(hd->data);
}

int net_http_new(uv_loop_t *loop, const char *host, int port, net_http_fn fn, void *arg,
                 net_http **out, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    int rc, len = sizeof ss;
    net_http *h = calloc(1, sizeof *h);
    *out = NULL;
    if (h == NULL) {
        snprintf(why, whylen, "out of memory");
        return KVS_ENOMEM;
    }
    h->fn = fn;
    h->arg = arg;
    uv_tcp_init(loop, &h->listen);
    h->listen.data = h;
    rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (rc == 0)
        rc = uv_tcp_bind(&h->listen, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->listen, 64, on_conn);
    if (rc == 0)
        rc = uv_tcp_getsockname(&h->listen, (struct sockaddr *)&ss, &len);
    if (rc != 0) {
        snprintf(why, whylen, "cannot serve metrics on %s:%d: %s", host, port, uv_strerror(rc));
        h->closing = true;
        uv_close((uv_handle_t *)&h->listen, listen_closed);
        return KVS_ENET;
    }
    h->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *out = h;
    return 0;
}

int net_http_port(const net_http *h)
{
    return h ? h->port : 0;
}

unsigned long long net_http_served(const net_http *h)
{
    return h ? h->served : 0;
}

unsigned long long net_http_rejected(const net_http *h)
{
    return h ? h->rejected : 0;
}

void net_http_free(net_http *h)
{
    if (h == NULL || h->closing)
        return;
    h->closing = true;
    while (h->conns)
        conn_close(h->conns);
    uv_close((uv_handle_t *)&h->listen, listen_closed);
}

static char *render_metrics(void *arg, size_t *len)
{
    return met_render_alloc(arg, len);
}

int net_http_metrics(uv_loop_t *loop, const cfg *c, met_reg *r, const char *who,
                     net_http **out, char *why, size_t whylen)
{
    *out = NULL;
    if (c->metrics_port == 0)
        return 0;
    int rc = net_http_new(loop, c->metrics_addr, c->metrics_port, render_metrics, r, out, why,
                          whylen);
    if (rc == 0)
        LOG(LOG_INFO, who, "metrics", "serving Prometheus metrics at http://%s:%d/metrics",
            c->metrics_addr, net_http_port(*out));
    if (rc == 0 && (c->secret_len > 0 || c->curve_files) &&
        strncmp(c->metrics_addr, "127.", 4) != 0)
        LOG(LOG_WARN, who, "metrics", "KVS_METRICS_ADDR=%s: the metrics endpoint needs no job "
            "secret; anyone who reaches it reads the job's nodes, size, state and traffic "
            "(127.0.0.1, the default, keeps it to this host)", c->metrics_addr);
    else
        snprintf(why + strlen(why), whylen - strlen(why), " (KVS_METRICS_PORT=%d)",
                 c->metrics_port);
    return rc;
}
