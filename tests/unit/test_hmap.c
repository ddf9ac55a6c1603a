/* test_hmap.c - common/hmap.c against a reference (a plain array indexed by
 * the test's own key numbering). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/hmap.h"
#include "kvs.h"

/* Distinct, scattered keys: a bijection on 64 bits (odd multiplier, xor). */
static uint64_t key_of(uint64_t i)
{
    uint64_t x = i * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static void *val_of(uint64_t i, int gen)
{
    return (void *)(uintptr_t)(i * 4 + 1 + ((uint64_t)gen << 40));
}

START_TEST(test_empty)
{
    hmap m;
    hmap_init(&m);
    ck_assert_uint_eq(m.len, 0);
    ck_assert_uint_eq(m.cap, 0);
    ck_assert_ptr_null(hmap_get(&m, 0));
    ck_assert_ptr_null(hmap_get(&m, 1));
    ck_assert_ptr_null(hmap_get(&m, UINT64_MAX));
    ck_assert_ptr_null(hmap_del(&m, 0));
    ck_assert_ptr_null(hmap_del(&m, UINT64_MAX));
    ck_assert_uint_eq(m.len, 0);
    hmap_fini(&m);
    hmap_fini(&m); /* twice is harmless: fini zeroes the map */
    ck_assert_ptr_null(hmap_get(&m, 5));
}
END_TEST

START_TEST(test_put_get_del)
{
    hmap m;
    int a, b, c;
    hmap_init(&m);
    ck_assert_int_eq(hmap_put(&m, 10, &a), 0);
    ck_assert_int_eq(hmap_put(&m, 20, &b), 0);
    ck_assert_uint_eq(m.len, 2);
    ck_assert_ptr_eq(hmap_get(&m, 10), &a);
    ck_assert_ptr_eq(hmap_get(&m, 20), &b);
    ck_assert_ptr_null(hmap_get(&m, 30));
    ck_assert_ptr_null(hmap_del(&m, 30));
    ck_assert_uint_eq(m.len, 2);

    /* replace keeps the length */
    ck_assert_int_eq(hmap_put(&m, 10, &c), 0);
    ck_assert_uint_eq(m.len, 2);
    ck_assert_ptr_eq(hmap_get(&m, 10), &c);

    ck_assert_ptr_eq(hmap_del(&m, 10), &c);
    ck_assert_uint_eq(m.len, 1);
    ck_assert_ptr_null(hmap_get(&m, 10));
    ck_assert_ptr_null(hmap_del(&m, 10));
    ck_assert_ptr_eq(hmap_get(&m, 20), &b);

    /* re-insert after delete */
    ck_assert_int_eq(hmap_put(&m, 10, &a), 0);
    ck_assert_ptr_eq(hmap_get(&m, 10), &a);
    ck_assert_uint_eq(m.len, 2);

    /* the documented iteration sees exactly the live entries */
    size_t seen = 0;
    for (size_t i = 0; i < m.cap; i++)
        if (m.used && m.used[i] == 1) {
            ck_assert(m.keys[i] == 10 || m.keys[i] == 20);
            seen++;
        }
    ck_assert_uint_eq(seen, 2);
    hmap_fini(&m);
    ck_assert_uint_eq(m.len, 0);
    /* usable again after fini */
    ck_assert_int_eq(hmap_put(&m, 1, &a), 0);
    ck_assert_ptr_eq(hmap_get(&m, 1), &a);
    hmap_fini(&m);
}
END_TEST

START_TEST(test_extreme_keys)
{
    hmap m;
    int a, b, c;
    hmap_init(&m);
    ck_assert_int_eq(hmap_put(&m, 0, &a), 0);
    ck_assert_int_eq(hmap_put(&m, UINT64_MAX, &b), 0);
    ck_assert_int_eq(hmap_put(&m, 1ull << 63, &c), 0);
    ck_assert_ptr_eq(hmap_get(&m, 0), &a);
    ck_assert_ptr_eq(hmap_get(&m, UINT64_MAX), &b);
    ck_assert_ptr_eq(hmap_get(&m, 1ull << 63), &c);
    ck_assert_ptr_null(hmap_get(&m, UINT64_MAX - 1));
    ck_assert_ptr_null(hmap_get(&m, 1));
    ck_assert_ptr_eq(hmap_del(&m, 0), &a);
    ck_assert_ptr_null(hmap_get(&m, 0));
    ck_assert_ptr_eq(hmap_get(&m, UINT64_MAX), &b);
    ck_assert_ptr_eq(hmap_del(&m, UINT64_MAX), &b);
    ck_assert_ptr_null(hmap_get(&m, UINT64_MAX));
    ck_assert_uint_eq(m.len, 1);
    hmap_fini(&m);
}
END_TEST

/* Keys that collide in the low bits of the hash: all land in one probe run. */
START_TEST(test_collisions)
{
    hmap m;
    enum { N = 200 };
    uint64_t keys[N];
    int n = 0;
    hmap_init(&m);
    for (uint64_t k = 0; n < N; k++)
        if ((hmap_mix(k) & 1023) == 7)
            keys[n++] = k;
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(hmap_put(&m, keys[i], val_of((uint64_t)i, 0)), 0);
    for (int i = 0; i < N; i += 2)
        ck_assert_ptr_eq(hmap_del(&m, keys[i]), val_of((uint64_t)i, 0));
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(hmap_get(&m, keys[i]), i % 2 ? val_of((uint64_t)i, 0) : NULL);
    /* reinsert over the tombstones; no duplicates may appear */
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(hmap_put(&m, keys[i], val_of((uint64_t)i, 1)), 0);
    ck_assert_uint_eq(m.len, N);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(hmap_get(&m, keys[i]), val_of((uint64_t)i, 1));
    size_t live = 0;
    for (size_t i = 0; i < m.cap; i++)
        live += m.used[i] == 1;
    ck_assert_uint_eq(live, N);
    hmap_fini(&m);
}
END_TEST

static uint64_t rng_state = 0xB7E151628AED2A6Bull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* 100k keys with deletes and replaces interleaved, checked against a
 * reference after every phase. */
START_TEST(test_many_keys)
{
    enum { N = 100000 };
    hmap m;
    int *gen = calloc(N, sizeof *gen); /* 0 absent, else generation of the value */
    size_t live = 0;
    ck_assert_ptr_nonnull(gen);
    hmap_init(&m);
    for (int phase = 0; phase < 4; phase++) {
        for (int op = 0; op < 3 * N; op++) {
            uint64_t i = rnd() % N;
            unsigned r = (unsigned)(rnd() % 10);
            if (r < (phase % 2 ? 3u : 6u)) { /* put (insert or replace) */
                int g = gen[i] ? gen[i] + 1 : 1;
                ck_assert_int_eq(hmap_put(&m, key_of(i), val_of(i, g)), 0);
                live += gen[i] == 0;
                gen[i] = g;
            } else if (r < 9) { /* delete */
                void *v = hmap_del(&m, key_of(i));
                ck_assert_ptr_eq(v, gen[i] ? val_of(i, gen[i]) : NULL);
                live -= gen[i] != 0;
                gen[i] = 0;
            } else {
                ck_assert_ptr_eq(hmap_get(&m, key_of(i)), gen[i] ? val_of(i, gen[i]) : NULL);
            }
        }
        ck_assert_uint_eq(m.len, live);
        for (uint64_t i = 0; i < N; i++)
            ck_assert_ptr_eq(hmap_get(&m, key_of(i)), gen[i] ? val_of(i, gen[i]) : NULL);
        /* keys never inserted are absent */
        for (uint64_t i = N; i < N + 1000; i++)
            ck_assert_ptr_null(hmap_get(&m, key_of(i)));
        /* load stays bounded: at most half full, counting tombstones */
        ck_assert((m.len + m.tombs) * 2 <= m.cap);
    }
    /* delete everything */
    for (uint64_t i = 0; i < N; i++)
        if (gen[i])
            ck_assert_ptr_eq(hmap_del(&m, key_of(i)), val_of(i, gen[i]));
    ck_assert_uint_eq(m.len, 0);
    for (uint64_t i = 0; i < N; i += 97)
        ck_assert_ptr_null(hmap_get(&m, key_of(i)));
    hmap_fini(&m);
    free(gen);
}
END_TEST

/* Insert/delete churn on a few keys must not grow the table without bound
 * (tombstones are reclaimed) and must keep finding the keys. */
START_TEST(test_tombstone_churn)
{
    hmap m;
    int a;
    hmap_init(&m);
    ck_assert_int_eq(hmap_put(&m, 424242, &a), 0);
    for (uint64_t i = 0; i < 200000; i++) {
        ck_assert_int_eq(hmap_put(&m, key_of(i), val_of(i, 0)), 0);
        ck_assert_ptr_eq(hmap_get(&m, key_of(i)), val_of(i, 0));
        ck_assert_ptr_eq(hmap_del(&m, key_of(i)), val_of(i, 0));
        ck_assert_ptr_null(hmap_get(&m, key_of(i)));
    }
    ck_assert_uint_eq(m.len, 1);
    ck_assert_ptr_eq(hmap_get(&m, 424242), &a);
    ck_assert_msg(m.cap <= 64, "cap grew to %zu with one live key", m.cap);
    hmap_fini(&m);
}
END_TEST

/* Random puts, gets and deletes over a small key space (so probe chains,
 * tombstones and freed runs interleave) agree with a plain array, and the
 * tombstone count matches the table. */
START_TEST(test_random_against_array)
{
    enum { K = 700, OPS = 400000 };
    static void *ref[K];
    hmap m;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    size_t live = 0;
    hmap_init(&m);
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = (size_t)(x % K);
        uint64_t key = k * 0x1000193ull; /* spread, and some neighbours collide */
        switch ((x >> 32) % 3) {
        case 0:
            ck_assert_int_eq(hmap_put(&m, key, val_of(k, op)), 0);
            live += ref[k] == NULL;
            ref[k] = val_of(k, op);
            break;
        case 1:
            ck_assert_ptr_eq(hmap_del(&m, key), ref[k]);
            live -= ref[k] != NULL;
            ref[k] = NULL;
            break;
        default:
            ck_assert_ptr_eq(hmap_get(&m, key), ref[k]);
        }
        ck_assert_uint_eq(m.len, live);
    }
    size_t used = 0, tombs = 0;
    for (size_t i = 0; i < m.cap; i++) {
        used += m.used[i] == 1;
        tombs += m.used[i] == 2;
    }
    ck_assert_uint_eq(used, m.len);
    ck_assert_uint_eq(tombs, m.tombs);
    for (size_t k = 0; k < K; k++)
        ck_assert_ptr_eq(hmap_get(&m, k * 0x1000193ull), ref[k]);
    hmap_fini(&m);
}
END_TEST

Suite *hmap_suite(void)
{
    Suite *s = suite_create("hmap");
    TCase *t = tcase_create("hmap");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_empty);
    tcase_add_test(t, test_put_get_del);
    tcase_add_test(t, test_extreme_keys);
    tcase_add_test(t, test_collisions);
    tcase_add_test(t, test_many_keys);
    tcase_add_test(t, test_tombstone_churn);
    tcase_add_test(t, test_random_against_array);
    suite_add_tcase(s, t);
    return s;
}
