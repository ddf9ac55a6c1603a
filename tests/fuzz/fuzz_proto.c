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
 * libFuzzer binary, and with plain cc linked to replay.c (as run-corpus), which replays
 * tests/fuzz/corpus and random inputs (normal CI, no clang needed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "kvs.h"
#include "proto/proto.h"
#include "tests/fuzz/fuzz_target.h"

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
    if (h.flags & PROTO_F_RSP) { /* row-sparse: the inside is proto_rsp_parse's */
        CHECK(h.type == PROTO_PUSH || h.type == PROTO_PUSHPULL || h.type == PROTO_PULL);
        CHECK(h.body_len >= PROTO_RSP_HDR && h.body_len <= FUZZ_MAX_MESSAGE);
    } else if (proto_has_data(&h) && PROTO_CODEC(h.flags)) { /* compressed push or value */
        CHECK(h.type == PROTO_PUSH || h.type == PROTO_PUSHPULL || h.type == PROTO_REPLY);
        CHECK(h.dtype == KVS_FLOAT32);
        CHECK((unsigned __int128)h.body_len <= (unsigned __int128)h.count * 8 + 8);
        CHECK(h.body_len <= FUZZ_MAX_MESSAGE);
    } else if (proto_has_data(&h)) {
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

/* ---- built-in seeds (fuzz_target.h) ---- */

static fz_seed_fn seed_add;

static void seed_decode(const proto_hdr *h, int nframes, uint32_t body)
{
    uint8_t buf[6 + PROTO_HDR_SIZE];
    buf[0] = 0;
    buf[1] = (uint8_t)nframes;
    for (int i = 0; i < 4; i++)
        buf[2 + i] = (uint8_t)(body >> (8 * i));
    proto_encode(h, buf + 6);
    seed_add(buf, sizeof buf);
}

static void seed_text(int sel, uint8_t param, const char *text)
{
    uint8_t buf[512];
    size_t n = strlen(text);
    buf[0] = (uint8_t)sel;
    buf[1] = param;
    memcpy(buf + 2, text, n);
    if (n + 2 <= sizeof buf)
        seed_add(buf, n + 2);
}

void fz_seeds(fz_seed_fn add)
{
    seed_add = add;
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = PROTO_PUSH;
    h.contrib = 1;
    h.sender = 9;
    h.req_id = 1;
    h.key = 42;
    h.count = h.total = 16;
    h.dtype = KVS_FLOAT32;
    h.body_len = 64;
    seed_decode(&h, 2, 64);                /* valid push */
    h.offset = 16;
    h.total = 32;
    h.part = 1;
    seed_decode(&h, 2, 64);                /* second part */
    h.type = PROTO_PUSHPULL;
    h.dtype = KVS_FLOAT16;
    h.body_len = 32;
    seed_decode(&h, 2, 32);
    h.type = PROTO_INIT;
    h.body_len = 0;
    seed_decode(&h, 1, 0);                 /* init from rank > 0 */
    h.type = PROTO_PULL;
    seed_decode(&h, 1, 0);
    h.type = PROTO_REPLY;
    h.status = KVS_ENOKEY;
    h.body_len = 20;
    seed_decode(&h, 2, 20);                /* error reply */
    h.status = 0;
    h.dtype = KVS_INT64;
    h.body_len = 128;
    seed_decode(&h, 2, 128);               /* data reply */
    h.count = (1ull << 61) + 8;            /* count * 8 wraps to 64 */
    h.total = UINT64_MAX;
    h.offset = 0;
    h.body_len = 64;
    seed_decode(&h, 2, 64);
    h.offset = UINT64_MAX - 1;             /* offset + count wraps */
    h.count = 8;
    seed_decode(&h, 2, 64);
    memset(&h, 0, sizeof h);
    h.type = PROTO_REGISTER;
    h.body_len = 40;
    seed_decode(&h, 2, 40);
    h.type = PROTO_REGISTER_ACK;
    h.key = 9;
    h.body_len = 60;
    seed_decode(&h, 2, 60);
    h.type = PROTO_HEARTBEAT;
    h.body_len = 0;
    seed_decode(&h, 1, 0);
    h.type = PROTO_SHUTDOWN;
    h.status = -7;
    seed_decode(&h, 1, 0);
    h.type = PROTO_ERROR;
    h.status = KVS_EPROTO;
    h.body_len = PROTO_ERRTEXT_MAX + 1;
    seed_decode(&h, 2, PROTO_ERRTEXT_MAX + 1);
    h.type = PROTO_BASE_END;
    h.body_len = 0;
    seed_decode(&h, 1, 0);

    seed_text(1, 8, "8 server tcp://10.0.0.1:5000\n9 worker tcp://10.0.0.2:5001\n");
    seed_text(1, 8, "1 server ipc:///tmp/kvs-1\n");
    seed_text(1, 1, "8 server a\n10 server b\n");
    seed_text(1, 8, "8 server tcp://x:1 extra\n");
    seed_text(1, 8, "8 server tcp://x:1");
    seed_text(1, 8, "0 boss\n\n");
    seed_text(2, 127, "role=worker endpoint=tcp://10.0.0.2:5001 rank=3 host=10.0.0.2");
    seed_text(2, 127, "role=server endpoint=- rank=-1 host=h future=1\n");
    seed_text(2, 4, "role=worker endpoint=too-long-for-five");
    seed_text(2, 127, "role=worker rank=x");
    seed_text(2, 127, "endpoint=e role=scheduler");
}
