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

/* fz_env, then *c loaded for role (a failure aborts, naming who); every log
 * line is formatted (its arguments are checked too) and none printed unless
 * FUZZ_LOG is set. */
void fz_setup(cfg *c, enum cfg_role role, int servers, int workers, const char *who);

/* ZeroMQ closes sockets on its own thread, later: a loaded machine lets
 * closed sockets pile up past ZMQ_MAX_SOCKETS.  Every 256th call replaces
 * *zctx with a fresh context after waiting for them (and would hang, i.e.
 * time out, on a socket that was never closed). */
void fz_ctx_turn(void **zctx);

#endif
