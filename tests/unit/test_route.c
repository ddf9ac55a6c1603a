/* test_route.c - worker/route.c: key placement (DESIGN.md "Key placement").
 *
 * References are computed here independently: the home server with 128-bit
 * arithmetic reduced mod 2^64 (and hand-computed constants), the big-array
 * split the way MXNet writes it, round(double(n) / S * i), in double.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "worker/wrk_int.h"

static wrk_routing routing(int s, uint64_t bound)
{
    wrk_routing r = {.num_servers = s, .bigarray_bound = bound, .p3 = false, .slice = 40000};
    return r;
}

/* (key * 9973) mod 2^64, then mod S: a different route to the same number. */
static int ref_home(uint64_t key, int s)
{
    unsigned __int128 prod = (unsigned __int128)key * 9973u;
    uint64_t wrapped = (uint64_t)(prod & (unsigned __int128)UINT64_MAX);
    return (int)(wrapped % (uint64_t)s);
}

/* MXNet: round(static_cast<double>(size) / num_servers * i). */
static uint64_t ref_split(uint64_t n, int s, uint64_t i)
{
    return (uint64_t)llround((double)n / s * (double)i);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

START_TEST(test_small_keys)
{
    static const int servers[] = {1, 2, 3, 4, 5, 7, 8, 13, 64, 1000, 65536};
    static const uint64_t keys[] = {0, 1, 2, 3, 100, 9973, 1ull << 32, (1ull << 63) - 1,
                                    1ull << 63, UINT64_MAX / 9973, UINT64_MAX / 9973 + 1,
                                    UINT64_MAX - 1, UINT64_MAX};
    wrk_part p;
    for (size_t si = 0; si < sizeof servers / sizeof servers[0]; si++) {
        wrk_routing r = routing(servers[si], 1000);
        for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++) {
            for (uint64_t count = 1; count < 1000; count += 333) {
                ck_assert_uint_eq(wrk_route_nparts(&r, count), 1);
                wrk_route_part(&r, keys[ki], count, 0, &p);
                ck_assert_msg(p.server == ref_home(keys[ki], servers[si]),
                              "key %llu S %d: server %d, expected %d",
                              (unsigned long long)keys[ki], servers[si], p.server,
                              ref_home(keys[ki], servers[si]));
                ck_assert_uint_eq(p.part, 0);
                ck_assert_uint_eq(p.offset, 0);
                ck_assert_uint_eq(p.count, count);
            }
        }
        for (int i = 0; i < 2000; i++) {
            uint64_t key = rnd();
            wrk_route_part(&r, key, 5, 0, &p);
            ck_assert_int_eq(p.server, ref_home(key, servers[si]));
        }
    }
    /* hand-computed: UINT64_MAX * 9973 mod 2^64 = 2^64 - 9973;
     * (2^64 - 9973) mod 7 = (2 - 5) mod 7 = 4, whereas the unwrapped product
     * is 5 mod 7 -- so this tells 64-bit arithmetic from exact arithmetic. */
    wrk_routing r7 = routing(7, 1000);
    wrk_route_part(&r7, UINT64_MAX, 10, 0, &p);
    ck_assert_int_eq(p.server, 4);
    /* key 1, S 10: 9973 mod 10 = 3; key 2: 19946 mod 10 = 6 */
    wrk_routing r10 = routing(10, 1000);
    wrk_route_part(&r10, 1, 10, 0, &p);
    ck_assert_int_eq(p.server, 3);
    wrk_route_part(&r10, 2, 10, 0, &p);
    ck_assert_int_eq(p.server, 6);
    /* (2^63 * 9973) mod 2^64 = 2^63 (9973 is odd); 2^63 mod 3 = 2 */
    wrk_routing r3 = routing(3, 1000);
    wrk_route_part(&r3, 1ull << 63, 10, 0, &p);
    ck_assert_int_eq(p.server, 2);
}
END_TEST

/* The S parts of a big key: contiguous, covering [0, n), part i on server
 * i, each of floor(n/S) or ceil(n/S) elements. */
static void check_big(uint64_t key, uint64_t n, int s, uint64_t bound)
{
    wrk_routing r = routing(s, bound);
    uint64_t next = 0, q = n / (uint64_t)s;
    ck_assert_msg(wrk_route_nparts(&r, n) == (uint64_t)s, "n %llu S %d: %llu parts",
                  (unsigned long long)n, s, (unsigned long long)wrk_route_nparts(&r, n));
    for (int i = 0; i < s; i++) {
        wrk_part p;
        wrk_route_part(&r, key, n, (uint64_t)i, &p);
        ck_assert_uint_eq(p.part, (uint32_t)i);
        ck_assert_int_eq(p.server, i);
        ck_assert_msg(p.offset == next, "n %llu S %d part %d: offset %llu after %llu",
                      (unsigned long long)n, s, i, (unsigned long long)p.offset,
                      (unsigned long long)next);
        ck_assert_msg(p.count == q || p.count == q + 1, "n %llu S %d part %d: %llu elements",
                      (unsigned long long)n, s, i, (unsigned long long)p.count);
        next = p.offset + p.count;
    }
    ck_assert_msg(next == n, "n %llu S %d: parts end at %llu", (unsigned long long)n, s,
                  (unsigned long long)next);
}

/* Compares every part with MXNet's double computation; returns the number
 * of differing parts and describes the first in first_bad. */
static int mxnet_mismatches(uint64_t n, int s, char *first_bad, size_t len)
{
    wrk_routing r = routing(s, 1);
    int bad = 0;
    for (int i = 0; i < s; i++) {
        wrk_part p;
        wrk_route_part(&r, 1, n, (uint64_t)i, &p);
        uint64_t a = ref_split(n, s, (uint64_t)i), b = ref_split(n, s, (uint64_t)i + 1);
        if (p.offset != a || p.count != b - a) {
            if (bad++ == 0 && first_bad[0] == '\0')
                snprintf(first_bad, len,
                         "n %llu S %d part %d: [%llu, +%llu), MXNet round(double(n)/S*i) "
                         "gives [%llu, +%llu)",
                         (unsigned long long)n, s, i, (unsigned long long)p.offset,
                         (unsigned long long)p.count, (unsigned long long)a,
                         (unsigned long long)(b - a));
        }
    }
    return bad;
}

START_TEST(test_big_keys)
{
    static const int servers[] = {2, 3, 4, 5, 6, 7, 9, 10, 12, 16, 31, 100, 1000};
    static const uint64_t sizes[] = {1000, 1001, 1002, 1003, 1999, 4096, 99999, 1000000,
                                     1000003, 123456789, 1ull << 32, (1ull << 40) - 1};
    for (size_t si = 0; si < sizeof servers / sizeof servers[0]; si++)
        for (size_t ni = 0; ni < sizeof sizes / sizeof sizes[0]; ni++)
            check_big(42, sizes[ni], servers[si], 1000);
    for (int i = 0; i < 3000; i++) {
        int s = 2 + (int)(rnd() % 63);
        uint64_t n = 1000 + rnd() % ((1ull << (10 + rnd() % 31)) - 1000 + 1);
        if (n >= 1ull << 40)
            n = (1ull << 40) - 1;
        check_big(rnd(), n, s, 1000);
    }
}
END_TEST

/* DESIGN.md: part i has round(n/S*(i+1)) - round(n/S*i) elements, as MXNet
 * computes it (in double).  Many (n, S) pairs, n < 2^40, including the
 * ties n*i/S = x.5 where double and exact rational arithmetic part ways. */
START_TEST(test_big_keys_match_mxnet)
{
    static const int servers[] = {2, 3, 4, 5, 6, 7, 9, 10, 12, 16, 31, 100, 1000};
    static const uint64_t sizes[] = {1000, 1001, 1002, 1003, 1999, 4096, 99999, 1000000,
                                     1000003, 123456789, 1ull << 32, (1ull << 40) - 1};
    char first[300] = "";
    long bad = 0, pairs = 0;
    for (size_t si = 0; si < sizeof servers / sizeof servers[0]; si++)
        for (size_t ni = 0; ni < sizeof sizes / sizeof sizes[0]; ni++, pairs++)
            bad += mxnet_mismatches(sizes[ni], servers[si], first, sizeof first) != 0;
    for (int i = 0; i < 3000; i++, pairs++) {
        int s = 2 + (int)(rnd() % 63);
        uint64_t n = 1 + rnd() % ((1ull << (1 + rnd() % 40)) - 1);
        bad += mxnet_mismatches(n, s, first, sizeof first) != 0;
    }
    for (int s = 2; s <= 64; s++)
        for (uint64_t n = 1; n < 1000 + 4 * (uint64_t)s; n += (n < 2 * (uint64_t)s ? 1 : 997),
             pairs++)
            bad += mxnet_mismatches(n, s, first, sizeof first) != 0;
    ck_assert_msg(bad == 0, "%ld of %ld (n, S) pairs split differently from MXNet; first: %s",
                  bad, pairs, first);
}
END_TEST

START_TEST(test_bound_edges)
{
    wrk_routing r = routing(4, 1000);
    wrk_part p;
    /* bound - 1: one part on the home server */
    ck_assert_uint_eq(wrk_route_nparts(&r, 999), 1);
    wrk_route_part(&r, 5, 999, 0, &p);
    ck_assert_int_eq(p.server, ref_home(5, 4));
    ck_assert_uint_eq(p.offset, 0);
    ck_assert_uint_eq(p.count, 999);
    /* bound: split 250 each */
    ck_assert_uint_eq(wrk_route_nparts(&r, 1000), 4);
    for (int i = 0; i < 4; i++) {
        wrk_route_part(&r, 5, 1000, (uint64_t)i, &p);
        ck_assert_int_eq(p.server, i);
        ck_assert_uint_eq(p.offset, 250u * (unsigned)i);
        ck_assert_uint_eq(p.count, 250);
    }
    /* hand-computed: n 10, S 4: round(2.5)=3, round(5)=5, round(7.5)=8 */
    r = routing(4, 10);
    static const uint64_t off[] = {0, 3, 5, 8}, cnt[] = {3, 2, 3, 2};
    for (int i = 0; i < 4; i++) {
        wrk_route_part(&r, 99, 10, (uint64_t)i, &p);
        ck_assert_uint_eq(p.offset, off[i]);
        ck_assert_uint_eq(p.count, cnt[i]);
    }
    /* bound 1: every non-empty key is split */
    r = routing(3, 1);
    ck_assert_uint_eq(wrk_route_nparts(&r, 1), 3);
    check_big(1, 1, 3, 1);
    /* bound UINT64_MAX: nothing is split */
    r = routing(3, UINT64_MAX);
    ck_assert_uint_eq(wrk_route_nparts(&r, UINT64_MAX - 1), 1);
}
END_TEST

/* n < S: some parts are empty, the rest still contiguous and covering. */
START_TEST(test_fewer_elements_than_servers)
{
    for (int s = 2; s <= 40; s++)
        for (uint64_t n = 1; n < (uint64_t)s; n++) {
            wrk_routing r = routing(s, 1);
            uint64_t next = 0, empty = 0;
            ck_assert_uint_eq(wrk_route_nparts(&r, n), (uint64_t)s);
            for (int i = 0; i < s; i++) {
                wrk_part p;
                wrk_route_part(&r, 3, n, (uint64_t)i, &p);
                ck_assert_uint_eq(p.offset, next);
                ck_assert_int_eq(p.server, i);
                ck_assert_msg(p.count <= 1, "n %llu S %d", (unsigned long long)n, s);
                empty += p.count == 0;
                next += p.count;
            }
            ck_assert_uint_eq(next, n);
            ck_assert_uint_eq(empty, (uint64_t)s - n);
        }
}
END_TEST

START_TEST(test_one_server)
{
    wrk_routing r = routing(1, 1000);
    wrk_part p;
    static const uint64_t sizes[] = {1, 999, 1000, 1001, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ck_assert_uint_eq(wrk_route_nparts(&r, sizes[i]), 1);
        wrk_route_part(&r, UINT64_MAX, sizes[i], 0, &p);
        ck_assert_int_eq(p.server, 0);
        ck_assert_uint_eq(p.offset, 0);
        ck_assert(p.count == sizes[i]);
        ck_assert_uint_eq(p.part, 0);
    }
}
END_TEST

START_TEST(test_zero_count)
{
    static const int servers[] = {1, 3, 8};
    for (int i = 0; i < 3; i++) {
        wrk_routing r = routing(servers[i], 1000);
        ck_assert_uint_eq(wrk_route_nparts(&r, 0), 0);
        r.bigarray_bound = 1;
        ck_assert_uint_eq(wrk_route_nparts(&r, 0), 0);
        r.p3 = true;
        r.slice = 10;
        ck_assert_uint_eq(wrk_route_nparts(&r, 0), 0);
    }
}
END_TEST

/* Big keys near 2^64 elements: the split is still exact and covering. */
START_TEST(test_huge_counts)
{
    static const uint64_t sizes[] = {UINT64_MAX, UINT64_MAX - 1, 1ull << 63, (1ull << 62) + 3};
    static const int servers[] = {2, 3, 7, 1000};
    for (size_t si = 0; si < 4; si++)
        for (size_t ni = 0; ni < 4; ni++) {
            wrk_routing r = routing(servers[si], 1000);
            uint64_t next = 0;
            ck_assert_uint_eq(wrk_route_nparts(&r, sizes[ni]), (uint64_t)servers[si]);
            for (int i = 0; i < servers[si]; i++) {
                wrk_part p;
                wrk_route_part(&r, 1, sizes[ni], (uint64_t)i, &p);
                ck_assert(p.offset == next);
                /* parts differ by at most one element */
                uint64_t q = sizes[ni] / (uint64_t)servers[si];
                ck_assert(p.count == q || p.count == q + 1);
                next += p.count;
            }
            ck_assert(next == sizes[ni]);
        }
}
END_TEST

static void check_p3(uint64_t key, uint64_t n, int s, uint64_t slice)
{
    wrk_routing r = {.num_servers = s, .bigarray_bound = 1000, .p3 = true, .slice = slice};
    uint64_t want = n / slice + (n % slice != 0);
    ck_assert_msg(wrk_route_nparts(&r, n) == want, "n %llu slice %llu: %llu parts, want %llu",
                  (unsigned long long)n, (unsigned long long)slice,
                  (unsigned long long)wrk_route_nparts(&r, n), (unsigned long long)want);
    if (want > 5000)
        return;
    int home = ref_home(key, s);
    uint64_t next = 0;
    for (uint64_t i = 0; i < want; i++) {
        wrk_part p;
        wrk_route_part(&r, key, n, i, &p);
        ck_assert_uint_eq(p.part, (uint32_t)i);
        ck_assert(p.offset == next);
        ck_assert(p.offset == i * slice);
        if (i + 1 < want)
            ck_assert(p.count == slice);
        else
            ck_assert(p.count == n - (want - 1) * slice && p.count >= 1 && p.count <= slice);
        ck_assert_int_eq(p.server, (int)(((uint64_t)home + i) % (uint64_t)s));
        next += p.count;
    }
    ck_assert(next == n);
}

START_TEST(test_p3)
{
    wrk_routing r = {.num_servers = 3, .bigarray_bound = 1000, .p3 = true, .slice = 10};
    wrk_part p;
    /* hand-computed: key 1, S 3 -> home 9973 mod 3 = 1; n 25, slice 10 */
    ck_assert_uint_eq(wrk_route_nparts(&r, 25), 3);
    static const int srv[] = {1, 2, 0};
    static const uint64_t off[] = {0, 10, 20}, cnt[] = {10, 10, 5};
    for (int i = 0; i < 3; i++) {
        wrk_route_part(&r, 1, 25, (uint64_t)i, &p);
        ck_assert_int_eq(p.server, srv[i]);
        ck_assert_uint_eq(p.offset, off[i]);
        ck_assert_uint_eq(p.count, cnt[i]);
    }
    /* exact multiple: last slice full */
    ck_assert_uint_eq(wrk_route_nparts(&r, 30), 3);
    wrk_route_part(&r, 1, 30, 2, &p);
    ck_assert_uint_eq(p.count, 10);
    /* small arrays are one slice on the home server, below the big bound too */
    ck_assert_uint_eq(wrk_route_nparts(&r, 7), 1);
    wrk_route_part(&r, 1, 7, 0, &p);
    ck_assert_int_eq(p.server, 1);
    ck_assert_uint_eq(p.count, 7);

    static const int servers[] = {1, 2, 3, 5, 8};
    static const uint64_t slices[] = {1, 7, 10, 40000};
    static const uint64_t sizes[] = {1, 6, 7, 8, 39999, 40000, 40001, 100000, 1000001};
    static const uint64_t keys[] = {0, 1, 12345, UINT64_MAX};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 9; c++)
                for (size_t d = 0; d < 4; d++)
                    if (sizes[c] / slices[b] < 5000)
                        check_p3(keys[d], sizes[c], servers[a], slices[b]);
}
END_TEST

/* A slice threshold near 2^64 (MXNET_KVSTORE_SLICE_THRESHOLD accepts up to
 * UINT64_MAX): every key is one slice; nothing may wrap to 0 parts. */
START_TEST(test_p3_huge_slice)
{
    static const uint64_t slices[] = {UINT64_MAX, UINT64_MAX - 1, 1ull << 63};
    static const uint64_t sizes[] = {1, 2, 3, 1000, 1ull << 40};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 5; b++)
            check_p3(77, sizes[b], 3, slices[a]);
}
END_TEST

/* Counts near 2^64 with p3: the part count must not wrap. */
START_TEST(test_p3_huge_counts)
{
    check_p3(1, UINT64_MAX, 4, 40000);
    check_p3(1, UINT64_MAX - 100, 4, 40000);
    check_p3(1, UINT64_MAX, 4, UINT64_MAX);
    check_p3(1, UINT64_MAX - 1, 4, UINT64_MAX);
    check_p3(1, 1ull << 63, 4, 3);
    /* the last slice of a huge key */
    wrk_routing r = {.num_servers = 4, .bigarray_bound = 1000, .p3 = true, .slice = 1ull << 62};
    wrk_part p;
    ck_assert_uint_eq(wrk_route_nparts(&r, UINT64_MAX), 4);
    wrk_route_part(&r, 0, UINT64_MAX, 3, &p);
    ck_assert(p.offset == 3ull << 62);
    ck_assert(p.count == (1ull << 62) - 1);
}
END_TEST

/* Messages of a key: each non-empty part cut into chunks of at most
 * chunk_bytes (at least one element), numbered in order. */
static void check_chunks(const wrk_routing *r, uint64_t key, uint64_t n, size_t esz)
{
    static wrk_part out[4096];
    uint64_t per = r->chunk_bytes ? (r->chunk_bytes / esz ? r->chunk_bytes / esz : 1) : 0;
    uint64_t nparts = wrk_route_nparts(r, n), want = 0;
    for (uint64_t i = 0; i < nparts; i++) {
        wrk_part p;
        wrk_route_part(r, key, n, i, &p);
        if (p.count)
            want += per ? (p.count + per - 1) / per : 1;
    }
    if (n == 0)
        want = 1;
    uint64_t got = wrk_route_chunks(r, key, n, esz, NULL);
    ck_assert_msg(got == want, "n %llu: %llu chunks, want %llu", (unsigned long long)n,
                  (unsigned long long)got, (unsigned long long)want);
    ck_assert(got <= 4096);
    ck_assert_uint_eq(wrk_route_chunks(r, key, n, esz, out), got);
    uint64_t next = 0, pi = 0;
    wrk_part p = {0, 0, 0, 0};
    if (nparts)
        wrk_route_part(r, key, n, 0, &p);
    for (uint64_t c = 0; c < got; c++) {
        ck_assert_uint_eq(out[c].part, (uint32_t)c);
        ck_assert(out[c].offset == next);
        ck_assert(n == 0 || out[c].count >= 1);
        ck_assert(per == 0 || out[c].count <= per);
        /* the chunk lies inside one placement part and goes to its server
         * (chunks and parts are both in offset order) */
        while (n > 0 && pi + 1 < nparts && out[c].offset >= p.offset + p.count)
            wrk_route_part(r, key, n, ++pi, &p);
        bool inside = out[c].offset >= p.offset &&
                      out[c].offset + out[c].count <= p.offset + p.count && p.count > 0 &&
                      out[c].server == p.server;
        ck_assert_msg(inside || n == 0, "chunk %llu of n %llu", (unsigned long long)c,
                      (unsigned long long)n);
        next += out[c].count;
    }
    ck_assert(next == n);
    if (n == 0) {
        ck_assert_int_eq(out[0].server, ref_home(key, r->num_servers));
        ck_assert_uint_eq(out[0].count, 0);
    }
}

START_TEST(test_chunks)
{
    static const uint64_t chunk[] = {0, 1, 4, 40, 4000, 1 << 20};
    static const uint64_t sizes[] = {0, 1, 2, 5, 99, 100, 101, 1000, 9999};
    static const int servers[] = {1, 3, 7};
    static const size_t esz[] = {2, 4, 8};
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 9; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < 3; d++) {
                    wrk_routing r = routing(servers[c], 10);
                    r.chunk_bytes = chunk[a];
                    if (chunk[a] && sizes[b] * esz[d] / (chunk[a] < esz[d] ? esz[d] : chunk[a])
                        > 3000)
                        continue;
                    check_chunks(&r, 5, sizes[b], esz[d]);
                    r.p3 = true;
                    r.slice = 7;
                    check_chunks(&r, 5, sizes[b], esz[d]);
                }
    /* hand-computed: S 3, n 100 float32, 40-byte chunks: parts 33/34/33 ->
     * 4 + 4 + 4 chunks of 10,10,10,3 | 10,10,10,4 | 10,10,10,3 */
    wrk_routing r = routing(3, 10);
    r.chunk_bytes = 40;
    wrk_part out[12];
    ck_assert_uint_eq(wrk_route_chunks(&r, 1, 100, 4, out), 12);
    static const uint64_t cnt[] = {10, 10, 10, 3, 10, 10, 10, 4, 10, 10, 10, 3};
    for (int i = 0; i < 12; i++) {
        ck_assert_uint_eq(out[i].count, cnt[i]);
        ck_assert_int_eq(out[i].server, i / 4);
    }
}
END_TEST

Suite *route_suite(void)
{
    Suite *s = suite_create("route");
    TCase *t = tcase_create("route");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_small_keys);
    tcase_add_test(t, test_big_keys);
    tcase_add_test(t, test_big_keys_match_mxnet);
    tcase_add_test(t, test_bound_edges);
    tcase_add_test(t, test_fewer_elements_than_servers);
    tcase_add_test(t, test_one_server);
    tcase_add_test(t, test_zero_count);
    tcase_add_test(t, test_huge_counts);
    tcase_add_test(t, test_p3);
    tcase_add_test(t, test_p3_huge_slice);
    tcase_add_test(t, test_chunks);
    tcase_add_test(t, test_p3_huge_counts);
    suite_add_tcase(s, t);
    return s;
}
