/* test_manners.c - libkvs leaves its host process alone unless asked:
 * malloc tuning (common/memtune.h) is opt-in through KVS_MALLOC_TUNE. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "kvs.h"

START_TEST(malloc_tune_opt_in)
{
    static cfg c;
    char err[512];
    unsetenv("KVS_MALLOC_TUNE");
    ck_assert_int_eq(cfg_load(&c, false, err, sizeof err), 0);
    ck_assert(!c.malloc_tune); /* the default: the host's malloc untouched */
    setenv("KVS_MALLOC_TUNE", "1", 1);
    ck_assert_int_eq(cfg_load(&c, false, err, sizeof err), 0);
    ck_assert(c.malloc_tune);
    setenv("KVS_MALLOC_TUNE", "0", 1);
    ck_assert_int_eq(cfg_load(&c, false, err, sizeof err), 0);
    ck_assert(!c.malloc_tune);
    setenv("KVS_MALLOC_TUNE", "maybe", 1);
    ck_assert_int_eq(cfg_load(&c, false, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_MALLOC_TUNE"));
    ck_assert_ptr_nonnull(strstr(err, "maybe"));
    unsetenv("KVS_MALLOC_TUNE");
}
END_TEST

Suite *manners_suite(void)
{
    Suite *s = suite_create("manners");
    TCase *t = tcase_create("manners");
    tcase_add_test(t, malloc_tune_opt_in);
    suite_add_tcase(s, t);
    return s;
}
