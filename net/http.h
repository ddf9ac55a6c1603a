/* http.h - a tiny HTTP/1.x responder on a libuv loop: GET /metrics.
 *
 * One request per connection (the reply says "Connection: close").  Bounds:
 * HTTP_MAX_CONNS connections at once (a new one closes the oldest), a request
 * head of at most HTTP_MAX_HEAD bytes (431 past it), HTTP_TIMEOUT_MS for the
 * whole head to arrive and the reply to leave (then the connection is
 * dropped).  A request body is never read.  Nothing a client sends can do
 * more than make the responder close that client's connection.
 *
 * Threads: the loop's thread only.
 */
#ifndef KVS_NET_HTTP_H
#define KVS_NET_HTTP_H

#include <stddef.h>
#include <uv.h>

#define HTTP_MAX_CONNS 16
#define HTTP_MAX_HEAD 8192
#define HTTP_TIMEOUT_MS 10000

typedef struct net_http net_http;

/* The body of GET /metrics: a malloc'd text (*len bytes) that the responder
 * frees, or NULL (503). */
typedef char *(*net_http_fn)(void *arg, size_t *len);

/* Listen on host:port (host "0.0.0.0", "127.0.0.1", an IPv4 address).
 * Returns 0, or KVS_ENET with why (bind failed: port in use, ...). */
int net_http_new(uv_loop_t *loop, const char *host, int port, net_http_fn fn, void *arg,
                 net_http **out, char *why, size_t whylen);

/* The port bound. */
int net_http_port(const net_http *h);

/* Requests answered, and connections closed for a bad or slow request. */
unsigned long long net_http_served(const net_http *h);
unsigned long long net_http_rejected(const net_http *h);

/* Stop listening and close every connection; memory is freed once the
 * loop has run the close callbacks.  NULL is a no-op. */
void net_http_free(net_http *h);

/* Parse the request head in buf[0..len).  Returns:
 *   > 0  the head is complete: that many bytes; method and path filled
 *        (NUL-terminated, truncated to their sizes);
 *   0    incomplete: read more;
 *   < 0  minus the HTTP status to answer: -400 malformed, -431 head too
 *        large (len past HTTP_MAX_HEAD), -505 not HTTP/1.x, -414 path too
 *        long.
 * Pure: no allocation; any bytes are safe input (it is fuzzed). */
int http_parse_head(const char *buf, size_t len, char *method, size_t mlen, char *path,
                    size_t plen);

/* Serve the registry r at http://c->metrics_addr:c->metrics_port/metrics,
 * or do nothing (*out = NULL) when KVS_METRICS_PORT is 0.  Returns 0 or
 * KVS_ENET with why.  who: for the log line naming the address. */
struct cfg;
struct met_reg;
int net_http_metrics(uv_loop_t *loop, const struct cfg *c, struct met_reg *r, const char *who,
                     net_http **out, char *why, size_t whylen);

#endif
