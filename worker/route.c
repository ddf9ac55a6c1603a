/* route.c - key placement, MXNet-compatible; see DESIGN.md "Key placement".
 *   count <  BIGARRAY_BOUND: one part on server (key * 9973) % S;
 *   count >= BIGARRAY_BOUND: S parts, part i = [round(n*i/S), round(n*(i+1)/S))
 *                            on server i (empty parts are skipped by callers);
 *   p3: slices of at most SLICE_THRESHOLD elements, round-robin over servers
 *       starting at the key's home server. */
#include <math.h>

#include "worker/wrk_int.h"

/* MXNet's split point round(double(n) / S * i).  Below 2^53 elements it is
 * computed in double exactly as MXNet does, so placement matches MXNet's;
 * above, where a double cannot hold n, exactly in 128-bit integers (round
 * half up), so parts still tile [0, n) and differ by at most one element. */
static uint64_t split_point(uint64_t n, uint64_t i, uint64_t s)
{
    if (i == 0)
        return 0;
    if (i >= s)
        return n;
    if (n < (1ull << 53)) {
        double v = round((double)n / (double)s * (double)i);
        return v >= (double)n ? n : (uint64_t)v;
    }
    unsigned __int128 num = (unsigned __int128)n * i * 2 + s;
    return (uint64_t)(num / (2 * (unsigned __int128)s));
}

static int home_server(uint64_t key, int num_servers)
{
    return (int)((key * UINT64_C(9973)) % (uint64_t)num_servers);
}

uint64_t wrk_route_nparts(const wrk_routing *r, uint64_t count)
{
    if (count == 0)
        return 0;
    if (r->p3)
        return count / r->slice + (count % r->slice != 0);
    if (count < r->bigarray_bound || r->num_servers == 1)
        return 1;
    return (uint64_t)r->num_servers;
}

void wrk_route_part(const wrk_routing *r, uint64_t key, uint64_t count, uint64_t i,
                    wrk_part *out)
{
    out->part = (uint32_t)i;
    if (r->p3) {
        out->offset = i * r->slice;
        out->count = count - out->offset < r->slice ? count - out->offset : r->slice;
        out->server = (int)(((uint64_t)home_server(key, r->num_servers) + i) % (uint64_t)r->num_servers);
        return;
    }
    if (count < r->bigarray_bound || r->num_servers == 1) {
        out->offset = 0;
        out->count = count;
        out->server = home_server(key, r->num_servers);
        return;
    }
    uint64_t a = split_point(count, i, (uint64_t)r->num_servers);
    uint64_t b = split_point(count, i + 1, (uint64_t)r->num_servers);
    if (b < a)
        b = a; /* double rounding can never shrink below the previous point */
    out->offset = a;
    out->count = b - a;
    out->server = (int)i;
}

uint64_t wrk_route_chunks(const wrk_routing *r, uint64_t key, uint64_t count, size_t esz,
                          wrk_part *out)
{
    uint64_t nparts = wrk_route_nparts(r, count), n = 0;
    uint64_t per = r->chunk_bytes && esz ? r->chunk_bytes / esz : 0;
    if (nparts == 0) {
        if (out)
            *out = (wrk_part){0, home_server(key, r->num_servers), 0, 0};
        return 1;
    }
    if (per == 0 && r->chunk_bytes)
        per = 1;
    for (uint64_t i = 0; i < nparts; i++) {
        wrk_part p;
        wrk_route_part(r, key, count, i, &p);
        if (p.count == 0)
            continue; /* more servers than elements */
        uint64_t pieces = per ? (p.count + per - 1) / per : 1;
        for (uint64_t c = 0; c < pieces; c++, n++) {
            if (out == NULL)
                continue;
            uint64_t off = c * (per ? per : p.count);
            out[n].part = (uint32_t)n;
            out[n].server = p.server;
            out[n].offset = p.offset + off;
            out[n].count = per && p.count - off > per ? per : p.count - off;
        }
    }
    return n;
}

uint64_t wrk_route_split(uint64_t n, uint64_t i, uint64_t s)
{
    return split_point(n, i, s);
}

int wrk_route_home(uint64_t key, int num_servers)
{
    return home_server(key, num_servers);
}
