/* test_promote.c - scheduler/promote.c: owners of key ranges with
 * replicated servers, their safety, promotions and lost ranges. */
#include <check.h>
#include <string.h>

#include "kvs.h"
#include "scheduler/promote.h"

static char why[256];

START_TEST(test_start)
{
    sched_owners o;
    char buf[64];
    ck_assert_int_eq(sched_owners_init(&o, 3), 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(o.owner[r], r);
        ck_assert(o.safe[r]);
        ck_assert_int_eq(sched_owners_backup(&o, r), (r + 1) % 3);
    }
    sched_owners_fmt(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "owners=0,1,2");
    sched_owners_fini(&o);
    /* one server: nothing to back it up, nothing safe */
    ck_assert_int_eq(sched_owners_init(&o, 1), 0);
    ck_assert(!o.safe[0]);
    ck_assert_int_eq(sched_owners_backup(&o, 0), -1);
    sched_owners_fini(&o);
}
END_TEST

/* Server 1 dies: server 2 (its backup) owns range 1.  Range 1 and server
 * 0's range (its backup was 1, now 2) are unsafe until their owner reports
 * the copy; server 2's own range stays safe (its backup is still 0). */
START_TEST(test_promote_and_sync)
{
    sched_owners o;
    char buf[64];
    ck_assert_int_eq(sched_owners_init(&o, 3), 0);
    ck_assert_int_eq(sched_owners_promote(&o, 1, why, sizeof why), 2);
    sched_owners_fmt(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "owners=0,2,2");
    ck_assert(!o.safe[0]);  /* server 0's backup is now 2: a copy is under way */
    ck_assert(!o.safe[1]);  /* moved to 2, whose backup 0 lacks it */
    ck_assert(o.safe[2]);   /* server 2's backup is still 0 */
    ck_assert_int_eq(sched_owners_backup(&o, 0), 2);
    ck_assert_int_eq(sched_owners_backup(&o, 2), 0);
    /* a report for a server that is not the backup changes nothing */
    sched_owners_synced(&o, 0, 1);
    ck_assert(!o.safe[0]);
    sched_owners_synced(&o, 0, 2);
    ck_assert(o.safe[0]);
    ck_assert(!o.safe[1]);
    sched_owners_synced(&o, 2, 0);
    ck_assert(o.safe[1] && o.safe[2]);
    /* then server 0 dies: everything goes to server 2, which has no backup */
    ck_assert_int_eq(sched_owners_promote(&o, 0, why, sizeof why), 2);
    sched_owners_fmt(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "owners=2,2,2");
    ck_assert_int_eq(sched_owners_backup(&o, 2), -1);
    /* and server 2's death loses everything */
    ck_assert_int_eq(sched_owners_promote(&o, 2, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "is lost: no other server lives") != NULL, "%s", why);
    /* a dead or unknown server cannot die again */
    ck_assert_int_eq(sched_owners_promote(&o, 1, why, sizeof why), -1);
    ck_assert_int_eq(sched_owners_promote(&o, 7, why, sizeof why), -1);
    ck_assert_int_eq(sched_owners_promote(&o, -1, why, sizeof why), -1);
    sched_owners_fini(&o);
}
END_TEST

/* An owner dies before its new backup holds its keys: the range is lost,
 * and the text names it. */
START_TEST(test_lost_before_sync)
{
    sched_owners o;
    ck_assert_int_eq(sched_owners_init(&o, 4), 0);
    ck_assert_int_eq(sched_owners_promote(&o, 2, why, sizeof why), 3);
    ck_assert_int_eq(sched_owners_promote(&o, 3, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "the key range of server 2 (held by server 3) is lost") != NULL,
                  "%s", why);
    sched_owners_fini(&o);
    /* after the sync the same death is survived */
    ck_assert_int_eq(sched_owners_init(&o, 4), 0);
    ck_assert_int_eq(sched_owners_promote(&o, 2, why, sizeof why), 3);
    sched_owners_synced(&o, 3, 0);
    sched_owners_synced(&o, 1, 3);
    for (int r = 0; r < 4; r++)
        ck_assert_msg(o.safe[r], "range %d", r);
    ck_assert_int_eq(sched_owners_promote(&o, 3, why, sizeof why), 0);
    ck_assert_int_eq(o.owner[2], 0);
    ck_assert_int_eq(o.owner[3], 0);
    ck_assert_int_eq(o.owner[1], 1);
    sched_owners_fini(&o);
}
END_TEST

Suite *promote_suite(void)
{
    Suite *s = suite_create("promote");
    TCase *t = tcase_create("promote");
    tcase_add_test(t, test_start);
    tcase_add_test(t, test_promote_and_sync);
    tcase_add_test(t, test_lost_before_sync);
    suite_add_tcase(s, t);
    return s;
}
