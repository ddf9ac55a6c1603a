/* test_srvbuf.c - server/buf.h: which value buffers are mappings of their
 * own, and that those carry the huge-page advice (VmFlags "hg" in
 * /proc/self/smaps): row-sparse steps touch random rows of them, and on
 * 4 KiB pages each row costs a TLB miss (6 us a row on a 2.5 GB table in a
 * virtual machine, against 0.1 us with 2 MiB pages). */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/datapath.h"
#include "server/buf.h"

/* The VmFlags line of the mapping holding p, into flags; 0, or -1 when
 * /proc/self/smaps has no such mapping. */
static int vm_flags(const void *p, char *flags, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, rc = -1;
    unsigned long a, b, at = (unsigned long)p;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = at >= a && at < b;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, len, "%s", line + 8);
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* Can this kernel take the advice at all? */
static int thp_here(void)
{
    return access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
}

START_TEST(value_mapped_huge)
{
    char flags[512];
    srv_buf *b = srv_buf_new_value(8u << 20);
    ck_assert_ptr_nonnull(b);
    ck_assert(b->mapped);
    ck_assert_uint_eq(b->cap, 8u << 20);
    ck_assert_int_eq(atomic_load(&b->refs), 1);
    memset(b->data, 1, 8u << 20); /* writable, whole */
    ck_assert_int_eq(vm_flags(b->data, flags, sizeof flags), 0);
    if (thp_here())
        ck_assert_msg(strstr(flags, " hg") != NULL, "value mapping without MADV_HUGEPAGE:%s",
                      flags);
    srv_buf_unref(b);
}
END_TEST

START_TEST(small_and_round_buffers_in_heap)
{
    srv_buf *v = srv_buf_new_value(DP_MAP_MIN - 64);
    srv_buf *r = srv_buf_new(8u << 20);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(r);
    ck_assert(!v->mapped);
    ck_assert(!r->mapped);
    ck_assert_uint_eq(v->cap, DP_MAP_MIN - 64);
    ck_assert_uint_eq((uintptr_t)r->data % 64, 0);
    srv_buf_unref(v);
    srv_buf_unref(r);
    srv_buf_unref(NULL);
}
END_TEST

Suite *srvbuf_suite(void)
{
    Suite *s = suite_create("srvbuf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, value_mapped_huge);
    tcase_add_test(tc, small_and_round_buffers_in_heap);
    suite_add_tcase(s, tc);
    return s;
}
