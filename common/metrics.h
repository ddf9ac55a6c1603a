/* metrics.h - a registry of counters, gauges and histograms, rendered in the
 * Prometheus text exposition format (version 0.0.4).
 *
 * A family has a name, help text, a type and up to two label names; a series
 * is one family with label values.  Components create the series they update
 * on a hot path once and keep the pointer; updating a value is one atomic
 * operation, so any thread may update while another renders.
 *
 * Threads: met_reg_new/free on one thread; everything else on any thread
 * (creation and rendering take the registry's lock).  Every update function
 * accepts a NULL series and does nothing, so code can count whether or not
 * it was given a registry.
 */
#ifndef KVS_COMMON_METRICS_H
#define KVS_COMMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum met_type { MET_COUNTER, MET_GAUGE, MET_HISTOGRAM };

typedef struct met_reg met_reg;
typedef struct met_fam met_fam;
typedef struct met_series met_series;

/* Histogram bucket upper bounds (seconds), shared by every histogram. */
#define MET_NBUCKETS 19
extern const double met_buckets[MET_NBUCKETS];

/* NULL on out of memory. */
met_reg *met_reg_new(void);
void met_reg_free(met_reg *r); /* NULL: no-op */

/* Called at the start of every render, on the rendering thread, with the
 * registry unlocked: the place to set gauges that are computed (queue
 * depths, ages). */
void met_reg_on_collect(met_reg *r, void (*fn)(void *arg), void *arg);

/* The family name (a valid Prometheus name; counters end in _total), help,
 * and label names (NULL when fewer).  Returns the existing family for a
 * name already registered; NULL on out of memory or r == NULL. */
met_fam *met_family(met_reg *r, enum met_type type, const char *name, const char *help,
                    const char *label1, const char *label2);

/* The series of f with these label values (NULL for missing ones; values
 * are copied and escaped when rendered).  Created on first use; NULL on out
 * of memory or f == NULL. */
met_series *met_get(met_fam *f, const char *v1, const char *v2);

/* Shorthand: family and series in one (for series without labels). */
met_series *met_one(met_reg *r, enum met_type type, const char *name, const char *help);

void met_add(met_series *s, uint64_t n);        /* counter += n */
void met_counter_set(met_series *s, uint64_t v); /* counter kept elsewhere: copy it */
void met_set(met_series *s, double v);          /* gauge = v */
void met_gauge_add(met_series *s, double d);    /* gauge += d */
void met_observe(met_series *s, double v);      /* histogram: one observation */

uint64_t met_counter_value(const met_series *s);
double met_gauge_value(const met_series *s);

/* Render everything into buf (at most len bytes, NUL-terminated when len >
 * 0).  Returns the length of the whole text (like snprintf), which may be
 * more than len - 1. */
size_t met_render(met_reg *r, char *buf, size_t len);

/* The whole text in a malloc'd, NUL-terminated buffer (*len without the
 * NUL), or NULL on out of memory. */
char *met_render_alloc(met_reg *r, size_t *len);

/* ---- the families every kvsd process shares ---- */

/* Traffic with one peer ("worker 3", "server 0", "scheduler"), by data path:
 * socket (ZeroMQ messages: header and body bytes) or cma (same-host direct
 * copies: the array bytes read or written with process_vm_readv/writev). */
enum { MET_PATH_SOCKET, MET_PATH_CMA, MET_NPATHS };
typedef struct met_peer {
    met_series *bytes[2][MET_NPATHS]; /* [0] received, [1] sent */
    met_series *msgs[2][MET_NPATHS];
} met_peer;

/* Creates the series (kvs_received_bytes_total{peer,path}, ...). */
void met_peer_init(met_peer *p, met_reg *r, const char *peer);
void met_peer_in(const met_peer *p, int path, uint64_t bytes);  /* one message in */
void met_peer_out(const met_peer *p, int path, uint64_t bytes); /* one message out */

/* kvs_errors_total{code="KVS_EPROTO"} += 1 (looked up by name: not for a
 * hot path that never fails). */
void met_error(met_reg *r, int code);

/* kvs_build_info{version,role} 1 and kvs_process_start_time_seconds. */
void met_process_info(met_reg *r, const char *role);

#endif
