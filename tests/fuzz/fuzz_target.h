/* fuzz_target.h - what a fuzz target offers its two drivers: libFuzzer
 * (make fuzz) and replay.c (make test, any C compiler). */
#ifndef KVS_TESTS_FUZZ_TARGET_H
#define KVS_TESTS_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

/* Run one input.  Returns 0; a failure aborts (or is a sanitizer report). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The target's built-in seeds: add(data, len) for each (copied). */
typedef void (*fz_seed_fn)(const uint8_t *data, size_t len);
void fz_seeds(fz_seed_fn add);

/* The fixed environment of a target: every DMLC_*, PS_*, KVS_* and MXNET_*
 * variable removed, then a job of servers and workers on 127.0.0.1 (no
 * secret, no metrics port, ephemeral ports, KVS_MAX_MESSAGE 1 MiB, one
 * reduction thread, arrays of 64 elements and more summed on the pool). */
void fz_env(enum cfg_role role, int servers, int workers);

#endif
