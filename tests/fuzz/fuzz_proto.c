/* fuzz_proto.c - fuzz target for proto/: proto_decode, proto_parse_nodes and
 * proto_parse_register.  Besides not crashing (run it under ASan/UBSan), every
 * accepted input must satisfy the invariants the rest of the system relies
 * on; a violation aborts, so the fuzzer reports it like a crash.
 *
 * Input: byte 0 selects the target (mod 3), byte 1 is a parameter, the rest
 * is the data, copied into a buffer of exactly its size so that any read past
 * the end is caught by ASan.
 *   0 decode: byte 1 = nframes (mod 4); bytes 2..5 = body size (LE u32);
 *             the rest is the header frame (any length).
 *   1 nodes:  byte 1 = max entries (mod 17); the rest is the table body.
 *   2 register: byte 1 = endpoint buffer size (1 + b mod 160); the rest is
 *             the body.
 *
 * Built two ways (tests/fuzz/module.mk): with clang -fsanitize=fuzzer as a
 * libFuzzer binary, and with plain cc linked to run-corpus.c, which replays
 * tests/fuzz/corpus and random inputs (normal CI, no clang needed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "kvs.h"
#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_MESSAGE (1u << 20)

static void violated(const char *what)
{
    fprintf(stderr, "fuzz_proto: invariant violated: %s\n", what);
    abort();
}

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            violated(#cond);         \
    } while (0)

static bool is_data_type(int t)
{
    return t == PROTO_INIT || t == PROTO_PUSH || t == PROTO_PULL || t == PROTO_PUSHPULL;
}

static void fuzz_decode(const uint8_t *p, size_t n, int nframes, size_t body)
{
    const proto_limits lim = {FUZZ_MAX_MESSAGE};
    proto_hdr h, h2;
    char why[200];
    uint8_t *hdr = malloc(n ? n : 1);
    if (hdr == NULL)
        return;
    memcpy(hdr, p, n);
    why[0] = '\0';
    int rc = proto_decode(hdr, n, nframes, body, &lim, &h, why, sizeof why);
    if (rc != 0) {
        CHECK(rc == KVS_EPROTO || rc == KVS_ETOOBIG);
        CHECK(why[0] != '\0');
        CHECK(memchr(why, '\0', sizeof why) != NULL);
        goto out;
    }
    CHECK(n == PROTO_HDR_SIZE);
    CHECK(nframes == 1 || nframes == 2);
    CHECK(proto_type_known(h.type));
    CHECK(h.body_len == (nframes == 2 ? body : 0));
    CHECK((nframes == 2) == (h.body_len > 0));
    CHECK(h.status <= 0 && h.status >= -1000);
    if (is_data_type(h.type) || (h.type == PROTO_REPLY && h.status == 0))
        CHECK(h.dtype < KVS_NUM_DTYPES);
    if (is_data_type(h.type) || h.type == PROTO_REPLY)
        CHECK(h.offset <= h.total && h.count <= h.total - h.offset);
    if (proto_has_data(&h)) {
        unsigned __int128 need = (unsigned __int128)h.count * kvs_dtype_size((kvs_dtype)h.dtype);
        CHECK(need == h.body_len);
        CHECK(h.body_len <= FUZZ_MAX_MESSAGE);
    } else if (h.type == PROTO_PULL) {
        CHECK(h.body_len == 0);
    } else if (h.type == PROTO_REPLY || h.type == PROTO_ERROR) {
        CHECK(h.body_len <= PROTO_ERRTEXT_MAX);
    } else {
        CHECK(h.body_len <= PROTO_TEXT_MAX);
    }
    /* re-encoding what was accepted gives the same header back */
    uint8_t again[PROTO_HDR_SIZE];
    proto_encode(&h, again);
    CHECK(proto_decode(again, sizeof again, nframes, body, &lim, &h2, why, sizeof why) == 0);
    CHECK(memcmp(&h, &h2, sizeof h) == 0 || (h.type == h2.type && h.flags == h2.flags &&
                                             h.sender == h2.sender && h.status == h2.status &&
                                             h.priority == h2.priority && h.req_id == h2.req_id &&
                                             h.key == h2.key && h.offset == h2.offset &&
                                             h.count == h2.count && h.total == h2.total &&
                                             h.round == h2.round && h.dtype == h2.dtype &&
                                             h.part == h2.part && h.body_len == h2.body_len));
    /* and the same bytes, but for the reserved field (always written as 0) */
    CHECK(memcmp(again, hdr, 10) == 0 && memcmp(again + 12, hdr + 12, PROTO_HDR_SIZE - 12) == 0);
    (void)proto_type_name(h.type);
out:
    free(hdr);
}

static void fuzz_nodes(const uint8_t *p, size_t n, int max)
{
    proto_node nodes[16];
    char why[200];
    char *body = malloc(n ? n : 1);
    if (body == NULL)
        return;
    memcpy(body, p, n);
    memset(nodes, 0x5A, sizeof nodes);
    int rc = proto_parse_nodes(body, n, nodes, max, why, sizeof why);
    if (rc < 0) {
        CHECK(rc == KVS_EPROTO);
        CHECK(why[0] != '\0');
    } else {
        CHECK(rc <= max);
        CHECK(n == 0 || body[n - 1] == '\n');
        for (int i = 0; i < rc; i++) {
            CHECK(nodes[i].id >= 1 && nodes[i].id <= (1 << 20));
            CHECK(nodes[i].role == CFG_ROLE_SERVER || nodes[i].role == CFG_ROLE_WORKER);
            CHECK(memchr(nodes[i].endpoint, '\0', sizeof nodes[i].endpoint) != NULL);
            CHECK(nodes[i].endpoint[0] != '\0');
        }
    }
    /* entries past max are never written */
    for (int i = max; i < 16; i++) {
        const uint8_t *b = (const uint8_t *)&nodes[i];
        for (size_t j = 0; j < sizeof nodes[i]; j++)
            CHECK(b[j] == 0x5A);
    }
    free(body);
}

static void fuzz_register(const uint8_t *p, size_t n, size_t eplen)
{
    char ep[161], host[33], why[200];
    int role = -99, rank = -99;
    char *body = malloc(n ? n : 1);
    if (body == NULL)
        return;
    memcpy(body, p, n);
    memset(ep, 0x5A, sizeof ep);
    memset(host, 0x5A, sizeof host);
    int rc = proto_parse_register(body, n, &role, ep, eplen, &rank, host, 32, why, sizeof why);
    if (rc != 0) {
        CHECK(rc == KVS_EPROTO);
        CHECK(why[0] != '\0');
    } else {
        CHECK(role == CFG_ROLE_SERVER || role == CFG_ROLE_WORKER);
        CHECK(rank >= -1 && rank <= (1 << 16));
        CHECK(memchr(ep, '\0', eplen) != NULL);
        CHECK(ep[0] != '\0'); /* "endpoint and role are required" */
        CHECK(memchr(host, '\0', 32) != NULL);
    }
    /* nothing written past the sizes given */
    for (size_t j = eplen; j < sizeof ep; j++)
        CHECK((uint8_t)ep[j] == 0x5A);
    CHECK((uint8_t)host[32] == 0x5A);
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    switch (data[0] % 3) {
    case 0: {
        if (size < 6)
            return 0;
        size_t body = (size_t)data[2] | (size_t)data[3] << 8 | (size_t)data[4] << 16 |
                      (size_t)data[5] << 24;
        fuzz_decode(data + 6, size - 6, data[1] % 4, body);
        break;
    }
    case 1:
        fuzz_nodes(data + 2, size - 2, data[1] % 17);
        break;
    default:
        fuzz_register(data + 2, size - 2, 1 + data[1] % 160);
        break;
    }
    return 0;
}
