/* test_pace.c - net/pace.c without a second host: no pacer without a link
 * rate, connections within the host (loopback) and fds that are no TCP
 * socket are never paced, and a bad peer index is ignored.  Connections to
 * other hosts are paced in tests/netns (pacing_3hosts). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "kvs.h"
#include "net/pace.h"

/* A connected loopback TCP pair: *a (connected), *b (accepted). */
static void tcp_pair(int *a, int *b)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    *a = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(*a, 0);
    ck_assert_int_eq(connect(*a, (struct sockaddr *)&sa, sizeof sa), 0);
    *b = accept(l, NULL, NULL);
    ck_assert_int_ge(*b, 0);
    close(l);
}

START_TEST(test_pace_off_without_rate)
{
    ck_assert_ptr_null(net_pacer_new(0, 4, 1, "test", "server"));
    ck_assert_ptr_null(net_pacer_new(-1, 4, 1, "test", "server"));
    ck_assert_ptr_null(net_pacer_new(1, 0, 1, "test", "server"));
    int n = -1;
    ck_assert_int_eq(net_pacer_see(NULL, 0, 0), 0);
    ck_assert(net_pacer_rate(NULL, &n) == 0);
    ck_assert_int_eq(n, 0);
    net_pacer_free(NULL);
}
END_TEST

START_TEST(test_pace_same_host_never)
{
    int a, b, p[2];
    tcp_pair(&a, &b);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(net_fd_remote(a), 0);
    ck_assert_int_eq(net_fd_remote(b), 0);
    ck_assert_int_eq(net_fd_remote(p[0]), 0); /* no socket */
    ck_assert_int_eq(net_fd_remote(-1), 0);
    net_pacer *pc = net_pacer_new(10, 3, 2, "test", "worker");
    ck_assert_ptr_nonnull(pc);
    ck_assert_int_eq(net_pacer_see(pc, 0, a), 0);
    ck_assert_int_eq(net_pacer_see(pc, 1, b), 0);
    ck_assert_int_eq(net_pacer_see(pc, 2, p[0]), 0);
    ck_assert_int_eq(net_pacer_see(pc, 3, a), 0);  /* out of range */
    ck_assert_int_eq(net_pacer_see(pc, -1, a), 0); /* out of range */
    ck_assert_int_eq(net_pacer_see(pc, 0, -1), 0); /* fd unknown */
    int n = -1;
    ck_assert(net_pacer_rate(pc, &n) == 0);
    ck_assert_int_eq(n, 0);
    /* the kernel keeps no cap on them: SO_MAX_PACING_RATE reads back unset */
    unsigned long rate = 0;
    socklen_t len = sizeof rate;
    ck_assert_int_eq(getsockopt(a, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len), 0);
    ck_assert(rate == ~0ul || rate == ~0u);
    net_pacer_free(pc);
    close(a);
    close(b);
    close(p[0]);
    close(p[1]);
}
END_TEST

/* KVS_LINK_GBPS: a rate in Gbit/s, 0 (the default) to 100000; anything
 * else refused at start-up, naming the variable. */
START_TEST(test_pace_setting)
{
    cfg c;
    char err[512];
    for (size_t i = 0; i < cfg_nvars; i++)
        unsetenv(cfg_vars[i].name);
    setenv("DMLC_PS_ROOT_URI", "10.1.2.3", 1);
    setenv("DMLC_PS_ROOT_PORT", "9091", 1);
    setenv("DMLC_NUM_SERVER", "2", 1);
    setenv("DMLC_NUM_WORKER", "3", 1);
    ck_assert_msg(cfg_load(&c, true, err, sizeof err) == 0, "%s", err);
    ck_assert(c.link_gbps == 0);
    setenv("KVS_LINK_GBPS", "0.25", 1);
    ck_assert_msg(cfg_load(&c, true, err, sizeof err) == 0, "%s", err);
    ck_assert(c.link_gbps == 0.25);
    const char *bad[] = {"-1", "100001", "fast", "nan", "10gbit", "1e9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("KVS_LINK_GBPS", bad[i], 1);
        err[0] = '\0';
        ck_assert_int_eq(cfg_load(&c, true, err, sizeof err), KVS_ECONFIG);
        ck_assert_msg(strstr(err, "KVS_LINK_GBPS") != NULL, "'%s': %s", bad[i], err);
    }
    unsetenv("KVS_LINK_GBPS");
}
END_TEST

Suite *pace_suite(void)
{
    Suite *s = suite_create("pace");
    TCase *t = tcase_create("pace");
    tcase_add_test(t, test_pace_off_without_rate);
    tcase_add_test(t, test_pace_same_host_never);
    tcase_add_test(t, test_pace_setting);
    suite_add_tcase(s, t);
    return s;
}
