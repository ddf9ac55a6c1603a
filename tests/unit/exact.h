/* exact.h - exact dtype patterns of small integers for the unit tests,
 * built bit by bit here (sharing no code with reduce/). */
#ifndef KVS_TESTS_UNIT_EXACT_H
#define KVS_TESTS_UNIT_EXACT_H

#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

/* ---- exact conversions of small integers ---- */

/* IEEE binary16 pattern of integer v, |v| <= 2048 (exact). */
static inline uint16_t f16_of_int(int v)
{
    uint16_t sign = 0;
    if (v < 0)
        sign = 0x8000;
    unsigned a = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    if (a == 0)
        return sign;
    while ((a >> e) > 1)
        e++;
    /* value = 1.m * 2^e; 10 mantissa bits */
    unsigned mant = (e <= 10 ? a << (10 - e) : a >> (e - 10)) & 0x3ff;
    return (uint16_t)(sign | ((unsigned)(e + 15) << 10) | mant);
}

/* bfloat16 pattern of integer v, |v| <= 256 (exact). */
static inline uint16_t bf16_of_int(int v)
{
    uint16_t sign = 0;
    if (v < 0)
        sign = 0x8000;
    unsigned a = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    if (a == 0)
        return sign;
    while ((a >> e) > 1)
        e++;
    unsigned mant = (e <= 7 ? a << (7 - e) : a >> (e - 7)) & 0x7f;
    return (uint16_t)(sign | ((unsigned)(e + 127) << 7) | mant);
}

static inline size_t dsize(kvs_dtype t)
{
    static const size_t sz[] = {4, 8, 2, 2, 4, 8};
    return sz[t];
}

/* Write n small integers as dtype t into buf. */
static inline void fill(kvs_dtype t, void *buf, const int *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case KVS_FLOAT32: ((float *)buf)[i] = (float)v[i]; break;
        case KVS_FLOAT64: ((double *)buf)[i] = (double)v[i]; break;
        case KVS_FLOAT16: ((uint16_t *)buf)[i] = f16_of_int(v[i]); break;
        case KVS_BFLOAT16: ((uint16_t *)buf)[i] = bf16_of_int(v[i]); break;
        case KVS_INT32: ((int32_t *)buf)[i] = v[i]; break;
        case KVS_INT64: ((int64_t *)buf)[i] = v[i]; break;
        }
    }
}

#endif
