/* keyfile.h - CURVE key files for deployments that give every node its own
 * key pair (KVS_CURVE_SERVER_KEY, KVS_CURVE_CLIENT_KEY,
 * KVS_CURVE_AUTHORIZED; see README's Security section).
 *
 * A key file is ZeroMQ's certificate format (czmq's zcert, and what
 * kvs-keygen writes): lines `public-key = "<40 Z85 characters>"` and, in a
 * secret file, `secret-key = "..."`; other lines (comments, `metadata`,
 * `curve`, `role = ...`) are ignored.  A file that holds a secret key must
 * not be readable by group or others (as KVS_SECRET_FILE).
 *
 * The authorized file lists the client keys a scheduler or server lets in,
 * one per line: `<role> <40 Z85 characters> [anything]`, role `worker` or
 * `server`; `#` starts a comment line.  It must not be writable by group or
 * others (whoever can add a line can join the job).
 *
 * Threads: any; no state.
 */
#ifndef KVS_COMMON_KEYFILE_H
#define KVS_COMMON_KEYFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

/* Decode 40 Z85 characters into 32 bytes.  0, or -1 (not Z85). */
int keyfile_z85_decode(const char *z, uint8_t out[32]);

/* Read the key file path for variable var: pk always, sk when the file has
 * one (*has_sk).  need_sk: a file without a secret key is an error.
 * 0, or KVS_ECONFIG with err naming var, the path and the problem. */
int keyfile_read_key(const char *var, const char *path, bool need_sk, uint8_t pk[32],
                     uint8_t sk[32], bool *has_sk, char *err, size_t errlen);

/* Read an authorized file into c->curve_auth_* (c->curve_nauth keys).
 * 0 or KVS_ECONFIG with err. */
int keyfile_read_authorized(const char *var, const char *path, cfg *c, char *err,
                            size_t errlen);

/* From the environment: KVS_CURVE_SERVER_KEY, KVS_CURVE_CLIENT_KEY,
 * KVS_CURVE_AUTHORIZED into c, checked against c->role (the scheduler needs
 * the server secret key and the authorized file; a server all three; a
 * worker the server's public key and its own key pair).  Sets
 * c->curve_files when KVS_CURVE_SERVER_KEY is set; the other two without it
 * are refused.  0 or KVS_ECONFIG with err. */
int keyfile_load(cfg *c, char *err, size_t errlen);

#endif
