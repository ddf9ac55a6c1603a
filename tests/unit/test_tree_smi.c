/* test_tree_smi.c - reading a real machine's topology: `nvidia-smi topo -m`
 * samples (tests/tree/smi/, written from the public descriptions of a
 * DGX-1V, a DGX A100, an 8-GPU PCIe server and a 4-GPU workstation with
 * NVLink bridges), KVS_TOPOLOGY=@FILE, and errors that name the place. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tree/json.h"
#include "tree/tree.h"

static char *smi_string(const char *path)
{
    char err[1024], *text, *out;
    size_t len;
    tree_topo t;
    ck_assert_msg(tj_read_file(path, &text, &len, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(tree_topo_parse_smi(text, len, path, &t, err, sizeof err) == 0, "%s", err);
    free(text);
    size_t need = tree_topo_format(&t, NULL, 0);
    out = malloc(need + 1);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(tree_topo_format(&t, out, need + 1), need);
    tree_topo_fini(&t);
    return out;
}

START_TEST(samples)
{
    static const struct {
        const char *file, *want;
    } cases[] = {
        /* NV1 -> 2, NV2 -> 3; the NVLink graph is connected: PCIe -> 0 (the
         * matrix of MXNet's DGX-1 tests) */
        {"tests/tree/smi/dgx1v.txt",
         "0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;"
         "3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0"},
        /* NVSwitch: NV12 everywhere; ANSI underlines, NIC and NUMA columns */
        {"tests/tree/smi/dgxa100.txt",
         "0,13,13,13,13,13,13,13;13,0,13,13,13,13,13,13;13,13,0,13,13,13,13,13;"
         "13,13,13,0,13,13,13,13;13,13,13,13,0,13,13,13;13,13,13,13,13,0,13,13;"
         "13,13,13,13,13,13,0,13;13,13,13,13,13,13,13,0"},
        /* PCIe only: PIX, NODE, SYS all 1 */
        {"tests/tree/smi/pcie8.txt",
         "0,1,1,1,1,1,1,1;1,0,1,1,1,1,1,1;1,1,0,1,1,1,1,1;1,1,1,0,1,1,1,1;"
         "1,1,1,1,0,1,1,1;1,1,1,1,1,0,1,1;1,1,1,1,1,1,0,1;1,1,1,1,1,1,1,0"},
        /* two NV4 bridges: the NVLink graph is not connected, PCIe stays */
        {"tests/tree/smi/ws4-bridges.txt", "0,5,1,1;5,0,1,1;1,1,0,5;1,1,5,0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = smi_string(cases[i].file);
        ck_assert_str_eq(s, cases[i].want);
        free(s);
    }
}
END_TEST

static int parse_text(const char *text, char *err, size_t errlen)
{
    tree_topo t;
    int rc = tree_topo_parse_smi(text, strlen(text), "x.txt", &t, err, errlen);
    if (rc == 0)
        tree_topo_fini(&t);
    return rc;
}

START_TEST(smi_errors)
{
    char err[512];
    const char *hdr = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n";
    char buf[1024];
    /* an unknown entry: line, row, column and what is allowed */
    snprintf(buf, sizeof buf, "%sGPU0\t X \tNV2\tSYS\t0-7\nGPU1\tNV2\t X \tNVX\t0-7\n"
                              "GPU2\tSYS\tNV1\t X \t0-7\n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_str_eq(err, "x.txt: line 3 (row GPU1), column GPU2: 'NVX': expected NV<links>, "
                          "PIX, PXB, PHB, NODE or SYS");
    /* a missing row */
    snprintf(buf, sizeof buf, "%sGPU0\t X \tNV2\tSYS\nGPU2\tSYS\tNV1\t X \n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_str_eq(err, "x.txt: no row for GPU1 (the header names GPU0..GPU2)");
    /* a short row */
    snprintf(buf, sizeof buf, "%sGPU0\t X \tNV2\n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_str_eq(err, "x.txt: line 2 (row GPU0): 2 entries, expected 3 (one per GPU)");
    /* the diagonal */
    snprintf(buf, sizeof buf, "%sGPU0\tNV1\tNV2\tSYS\n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "line 2 (row GPU0), column GPU0: 'NV1': expected X"));
    /* a row the header does not name, a row twice */
    snprintf(buf, sizeof buf, "%sGPU5\t X \tNV2\tSYS\n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "line 2: row GPU5 but the header names GPU0..GPU2"));
    snprintf(buf, sizeof buf, "%sGPU0\t X \tNV2\tSYS\nGPU0\t X \tNV2\tSYS\n", hdr);
    ck_assert_int_eq(parse_text(buf, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "line 3: row GPU0 appears twice"));
    /* not topo -m output at all */
    ck_assert_int_eq(parse_text("hello\n", err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "no header line"));
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* KVS_TOPOLOGY=@FILE (the text cfg_load read into cfg.topology) */
START_TEST(topology_at_file)
{
    char dir[] = "/tmp/kvs-topo-XXXXXX", path[64], spec[80], err[512];
    tree_topo t;
    bool found;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* a matrix file, rows on lines */
    snprintf(path, sizeof path, "%s/m.txt", dir);
    write_file(path, "0,2,1\n2,0,3\n1,3,0\n");
    snprintf(spec, sizeof spec, "@%s", path);
    ck_assert_int_eq(tree_topo_from_spec(spec, &t, &found, err, sizeof err), 0);
    ck_assert(found);
    ck_assert_int_eq(t.n, 3);
    ck_assert_double_eq(tree_w(&t, 1, 2), 3);
    ck_assert_double_eq(tree_w(&t, 0, 2), 1);
    tree_topo_fini(&t);
    /* topo -m text */
    snprintf(spec, sizeof spec, "@tests/tree/smi/ws4-bridges.txt");
    ck_assert_int_eq(tree_topo_from_spec(spec, &t, &found, err, sizeof err), 0);
    ck_assert_int_eq(t.n, 4);
    ck_assert_double_eq(tree_w(&t, 2, 3), 5);
    ck_assert_double_eq(tree_w(&t, 0, 3), 1);
    tree_topo_fini(&t);
    /* a bad entry names the variable, the file, row and column */
    write_file(path, "0,2,1\n2,0,x\n1,3,0\n");
    snprintf(spec, sizeof spec, "@%s", path);
    ck_assert_int_eq(tree_topo_from_spec(spec, &t, &found, err, sizeof err), KVS_ECONFIG);
    ck_assert_msg(strstr(err, "KVS_TOPOLOGY=@") && strstr(err, "m.txt: row 1, column 2: 'x'"),
                  "%s", err);
    /* a missing file */
    snprintf(spec, sizeof spec, "@%s/none.txt", dir);
    ck_assert_int_eq(tree_topo_from_spec(spec, &t, &found, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "none.txt: cannot open"));
    unlink(path);
    rmdir(dir);
    unsetenv("KVS_TOPOLOGY");
}
END_TEST

/* A 64 x 64 matrix with a bad last entry: the message names row and column
 * and still ends inside a 256-byte buffer. */
START_TEST(long_matrix_error_whole)
{
    size_t cap = 64 * 64 * 2 + 8;
    char *s = malloc(cap), err[256];
    size_t k = 0;
    tree_topo t;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++) {
            const char *x = i == 63 && j == 63 ? "?" : "1";
            s[k++] = *x;
            s[k++] = j < 63 ? ',' : ';';
        }
    s[k - 1] = '\0';
    ck_assert_int_eq(tree_topo_parse(s, "KVS_TOPOLOGY", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_msg(strstr(err, "KVS_TOPOLOGY: row 63, column 63: '?': expected a non-negative "
                              "number") != NULL,
                  "%s", err);
    ck_assert_ptr_nonnull(strstr(err, "or @FILE)"));
    free(s);
}
END_TEST

Suite *tree_smi_suite(void)
{
    Suite *s = suite_create("tree_smi");
    TCase *c = tcase_create("smi");
    tcase_add_test(c, samples);
    tcase_add_test(c, smi_errors);
    tcase_add_test(c, topology_at_file);
    tcase_add_test(c, long_matrix_error_whole);
    suite_add_tcase(s, c);
    return s;
}
