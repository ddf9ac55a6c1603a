/* test_keyfile.c - common/keyfile.c: Z85 against libzmq's encoder, key
 * files (public only, with the secret key, wrong modes, a secret key of
 * another pair, malformed lines) and authorized lists. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "kvs.h"
#include "common/config.h"
#include "common/keyfile.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/kvs-keyfile-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Write text to dir/name with mode; returns the path (static buffer). */
static const char *put(const char *name, const char *text, mode_t mode)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
    return path;
}

START_TEST(test_z85)
{
    uint8_t raw[32], back[32];
    char z[41];
    for (int i = 0; i < 32; i++)
        raw[i] = (uint8_t)(i * 37 + 11);
    ck_assert_ptr_nonnull(zmq_z85_encode(z, raw, 32));
    ck_assert_int_eq(keyfile_z85_decode(z, back), 0);
    ck_assert_mem_eq(raw, back, 32);
    z[7] = ' ';
    ck_assert_int_eq(keyfile_z85_decode(z, back), -1);
    /* five characters that decode past 2^32 */
    ck_assert_int_eq(keyfile_z85_decode("#####00000000000000000000000000000000000", back), -1);
}
END_TEST

START_TEST(test_key_files)
{
    char pub[41], sec[41], pub2[41], sec2[41], text[512], err[512];
    uint8_t pk[32], sk[32], want[32];
    bool has = false;
    mkdir_tmp();
    ck_assert_int_eq(zmq_curve_keypair(pub, sec), 0);
    ck_assert_int_eq(zmq_curve_keypair(pub2, sec2), 0);
    keyfile_z85_decode(pub, want);
    /* public only, zcert layout, mode 0644: fine unless the secret is needed */
    snprintf(text, sizeof text, "#   comment\nmetadata\n    role = \"worker\"\ncurve\n"
             "    public-key = \"%s\"\n", pub);
    const char *p = put("a.key", text, 0644);
    ck_assert_int_eq(keyfile_read_key("V", p, false, pk, sk, &has, err, sizeof err), 0);
    ck_assert(!has);
    ck_assert_mem_eq(pk, want, 32);
    ck_assert_int_eq(keyfile_read_key("V", p, true, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "no secret-key"));
    /* with the secret key: 0600 only */
    snprintf(text, sizeof text, "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n", pub,
             sec);
    p = put("a.key_secret", text, 0600);
    ck_assert_int_eq(keyfile_read_key("V", p, true, pk, sk, &has, err, sizeof err), 0);
    ck_assert(has);
    p = put("a.key_secret", text, 0640);
    ck_assert_int_eq(keyfile_read_key("V", p, true, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
    /* a secret key of another pair */
    snprintf(text, sizeof text, "public-key = %s\nsecret-key = %s\n", pub, sec2);
    p = put("mixed", text, 0600);
    ck_assert_int_eq(keyfile_read_key("V", p, true, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "does not belong"));
    /* malformed */
    p = put("short", "public-key = \"abc\"\n", 0600);
    ck_assert_int_eq(keyfile_read_key("V", p, false, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "line 1"));
    p = put("none", "nothing here\n", 0600);
    ck_assert_int_eq(keyfile_read_key("V", p, false, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "no public-key"));
    ck_assert_int_eq(keyfile_read_key("V", "/nonexistent/k", false, pk, sk, &has, err,
                                      sizeof err), KVS_ECONFIG);
    ck_assert_int_eq(keyfile_read_key("V", dir, false, pk, sk, &has, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "regular file"));
}
END_TEST

START_TEST(test_authorized)
{
    char a[41], b[41], s[41], text[512], err[512];
    static keyfile_keys c;
    mkdir_tmp();
    zmq_curve_keypair(a, s);
    zmq_curve_keypair(b, s);
    snprintf(text, sizeof text, "# keys\n\nworker %s node-a\n  server %s\n", a, b);
    const char *p = put("auth", text, 0644);
    ck_assert_int_eq(keyfile_read_authorized("A", p, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.nauth, 2);
    ck_assert(c.auth_worker[0]);
    ck_assert(!c.auth_worker[1]);
    uint8_t want[32];
    keyfile_z85_decode(b, want);
    ck_assert_mem_eq(c.auth_pk[1], want, 32);
    p = put("auth", text, 0666); /* anyone could add a key */
    ck_assert_int_eq(keyfile_read_authorized("A", p, &c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "write"));
    snprintf(text, sizeof text, "scheduler %s\n", a);
    p = put("auth", text, 0644);
    ck_assert_int_eq(keyfile_read_authorized("A", p, &c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "line 1"));
    p = put("auth", "# nobody\n", 0644);
    ck_assert_int_eq(keyfile_read_authorized("A", p, &c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "no key"));
}
END_TEST

/* The variables together: what each role needs. */
START_TEST(test_keyfile_load)
{
    char pub[41], sec[41], text[512], err[512], sp[128], cp[128], ap[128];
    static cfg c;
    static keyfile_keys k;
    /* the paths cfg_load would have read, as cfg_load_secret passes them */
    const keyfile_paths paths = {c.curve_server_key, c.curve_client_key, c.curve_authorized};
    mkdir_tmp();
    zmq_curve_keypair(pub, sec);
    snprintf(text, sizeof text, "public-key = \"%s\"\nsecret-key = \"%s\"\n", pub, sec);
    snprintf(sp, sizeof sp, "%s", put("listener", text, 0600));
    snprintf(cp, sizeof cp, "%s", put("client", text, 0600));
    snprintf(text, sizeof text, "worker %s\n", pub);
    snprintf(ap, sizeof ap, "%s", put("auth", text, 0644));
    c.curve_server_key[0] = '\0';
    c.curve_client_key[0] = '\0';
    c.curve_authorized[0] = '\0';
    unsetenv("KVS_SECRET");
    cfg_forget_env_secret();
    unsetenv("KVS_SECRET_FILE");
    unsetenv("KVS_SECURITY");
    /* a worker connects; the scheduler listens */
    ck_assert_int_eq(keyfile_load(&paths, false, true, "worker", &k, err, sizeof err), 0);
    ck_assert(!k.files);
    snprintf(c.curve_client_key, sizeof c.curve_client_key, "%s", cp);
    ck_assert_int_eq(keyfile_load(&paths, false, true, "worker", &k, err, sizeof err),
                     KVS_ECONFIG); /* no server key */
    snprintf(c.curve_server_key, sizeof c.curve_server_key, "%s", sp);
    ck_assert_int_eq(keyfile_load(&paths, false, true, "worker", &k, err, sizeof err), 0);
    ck_assert(k.files && k.client_set);
    /* needs the authorized list */
    ck_assert_int_eq(keyfile_load(&paths, true, false, "scheduler", &k, err, sizeof err),
                     KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_CURVE_AUTHORIZED"));
    ck_assert_ptr_nonnull(strstr(err, "scheduler"));
    snprintf(c.curve_authorized, sizeof c.curve_authorized, "%s", ap);
    ck_assert_int_eq(keyfile_load(&paths, true, false, "scheduler", &k, err, sizeof err), 0);
    ck_assert_int_eq(k.nauth, 1);
    ck_assert(k.auth_worker[0]);
    c.role = CFG_ROLE_SCHEDULER; /* cfg_load_secret reads the same files into c */
    /* the job secret and key files together, or auth with key files: refused */
    setenv("KVS_SECRET", "a secret of more than sixteen bytes", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "both set"));
    unsetenv("KVS_SECRET");
    cfg_forget_env_secret();
    setenv("KVS_SECURITY", "auth", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_SECURITY='auth'"));
    unsetenv("KVS_SECURITY");
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.security, CFG_SEC_CURVE);
    /* what the files gave, in the configuration */
    ck_assert(c.curve_files && c.curve_server_sk_set && c.curve_client_set);
    ck_assert_mem_eq(c.curve_server_pk, k.server_pk, 32);
    ck_assert_mem_eq(c.curve_client_sk, k.client_sk, 32);
    ck_assert_int_eq(c.curve_nauth, 1);
    ck_assert_int_eq(c.curve_auth_role[0], CFG_ROLE_WORKER);
    ck_assert_mem_eq(c.curve_auth_pk[0], k.auth_pk[0], 32);
    /* a server needs its client key too */
    c.curve_client_key[0] = '\0';
    ck_assert_int_eq(keyfile_load(&paths, true, true, "server", &k, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_CURVE_CLIENT_KEY"));
    c.curve_server_key[0] = '\0';
    c.curve_authorized[0] = '\0';
}
END_TEST

Suite *keyfile_suite(void)
{
    Suite *s = suite_create("keyfile");
    TCase *t = tcase_create("keyfile");
    tcase_add_test(t, test_z85);
    tcase_add_test(t, test_key_files);
    tcase_add_test(t, test_authorized);
    tcase_add_test(t, test_keyfile_load);
    suite_add_tcase(s, t);
    return s;
}
