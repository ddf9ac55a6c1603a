/* test_norms.c - server/norms.c: lamb's per-key records of the parts' sums
 * of squares: the whole key's sums in offset order once the parts cover
 * it, waiting while one is missing, overlaps and duplicates refused, old
 * rounds dropped, unwatched keys ignored. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "kvs.h"
#include "server/norms.h"

static char why[300];

START_TEST(total_in_offset_order)
{
    srv_norms n;
    double out[2];
    srv_norms_init(&n);
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 0, 10, 1, 2, why, sizeof why), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "key 7"));
    ck_assert_int_eq(srv_norms_watch(&n, 7), 0);
    ck_assert_int_eq(srv_norms_watch(&n, 7), 0); /* twice is fine */
    /* three parts of a 30-element key, arriving from the end: 2^-53 at 20
     * and at 10, then 1 at 0 */
    const double tiny = ldexp(1.0, -53);
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 20, 10, tiny, 4, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 7, 1, 30, out, why, sizeof why), 0);
    /* round 2's first part, early */
    ck_assert_int_eq(srv_norms_add(&n, 7, 2, 10, 10, 5, 5, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 7, 2, 30, out, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 10, 10, tiny, 2, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 7, 1, 30, out, why, sizeof why), 0); /* 0 missing */
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 0, 10, 1.0, 1, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 7, 1, 30, out, why, sizeof why), 1);
    /* offset order: (1 + 2^-53) + 2^-53 == 1 (ties to even); in arrival
     * order (2^-53 + 2^-53) + 1 would be 1 + 2^-52 */
    ck_assert(out[0] == 1.0 && out[1] == 7);
    ck_assert((tiny + tiny) + 1.0 != 1.0);
    /* the same part twice in a round: the same sums are a repeat (sent again
     * after a scheduler's restart), other sums an error */
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 10, 10, tiny, 2, why, sizeof why), 1);
    ck_assert_int_eq(srv_norms_add(&n, 7, 1, 10, 10, 1, 1, why, sizeof why), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "twice"));
    /* sums that cannot be */
    ck_assert_int_eq(srv_norms_add(&n, 7, 3, 0, 10, -1, 1, why, sizeof why), KVS_EINVAL);
    ck_assert_int_eq(srv_norms_add(&n, 7, 3, 0, 10, NAN, 1, why, sizeof why), KVS_EINVAL);
    ck_assert_int_eq(srv_norms_add(&n, 7, 3, 0, 10, 1, INFINITY, why, sizeof why), KVS_EINVAL);
    /* dropping round 1 keeps round 2 */
    srv_norms_drop_before(&n, 7, 2);
    ck_assert_uint_eq(srv_norms_get(&n, 7)->n, 1);
    ck_assert_int_eq(srv_norms_total(&n, 7, 1, 30, out, why, sizeof why), 0);
    srv_norms_fini(&n);
}
END_TEST

START_TEST(overlap_is_an_error)
{
    srv_norms n;
    double out[2];
    srv_norms_init(&n);
    srv_norms_watch(&n, 1);
    ck_assert_int_eq(srv_norms_add(&n, 1, 4, 0, 10, 1, 1, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_add(&n, 1, 4, 5, 10, 1, 1, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 1, 4, 15, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "overlap"));
    /* past the key's end */
    srv_norms_watch(&n, 2);
    ck_assert_int_eq(srv_norms_add(&n, 2, 1, 0, 20, 1, 1, why, sizeof why), 0);
    ck_assert_int_eq(srv_norms_total(&n, 2, 1, 15, out, why, sizeof why), KVS_EPROTO);
    srv_norms_fini(&n);
}
END_TEST

START_TEST(waiters)
{
    srv_norms n;
    int a, b;
    srv_norms_init(&n);
    ck_assert_int_eq(srv_norms_wait(&n, 3, &a), KVS_EINVAL); /* not watched */
    srv_norms_watch(&n, 3);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(srv_norms_wait(&n, 3, i % 2 ? (void *)&a : (void *)&b), 0);
    srv_norm_key *k = srv_norms_get(&n, 3);
    ck_assert_uint_eq(k->nwait, 10);
    srv_norms_unwait(&n, 3, &a);
    ck_assert_uint_eq(k->nwait, 9);
    srv_norms_unwait(&n, 99, &a); /* unknown key: nothing */
    ck_assert_ptr_null(srv_norms_get(&n, 99));
    srv_norms_fini(&n);
}
END_TEST

Suite *norms_suite(void)
{
    Suite *s = suite_create("norms");
    TCase *tc = tcase_create("norms");
    tcase_add_test(tc, total_in_offset_order);
    tcase_add_test(tc, overlap_is_an_error);
    tcase_add_test(tc, waiters);
    suite_add_tcase(s, tc);
    return s;
}
