/* keyfile.h - CURVE key files for deployments that give every node its own
 * key pair (KVS_CURVE_SERVER_KEY, KVS_CURVE_CLIENT_KEY,
 * KVS_CURVE_AUTHORIZED; see docs/guide/security.md).
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

#define KEYFILE_AUTH_MAX 1024 /* keys in an authorized file */

/* What the key files give a node (keyfile_load). */
typedef struct keyfile_keys {
    bool files;                 /* KVS_CURVE_SERVER_KEY given: CURVE keys from files */
    uint8_t server_pk[32];      /* the listeners' (scheduler's, servers') key pair */
    uint8_t server_sk[32];      /* (secret part: scheduler and servers only) */
    bool server_sk_set;
    uint8_t client_pk[32];      /* KVS_CURVE_CLIENT_KEY: this node's own key pair */
    uint8_t client_sk[32];
    bool client_set;
    int nauth;                  /* KVS_CURVE_AUTHORIZED: the client keys let in */
    uint8_t auth_pk[KEYFILE_AUTH_MAX][32];
    bool auth_worker[KEYFILE_AUTH_MAX]; /* true: a worker's key; false: a server's */
} keyfile_keys;

/* Decode 40 Z85 characters into 32 bytes.  0, or -1 (not Z85). */
int keyfile_z85_decode(const char *z, uint8_t out[32]);

/* Read the key file path for variable var: pk always, sk when the file has
 * one (*has_sk).  need_sk: a file without a secret key is an error.
 * 0, or KVS_ECONFIG with err naming var, the path and the problem. */
int keyfile_read_key(const char *var, const char *path, bool need_sk, uint8_t pk[32],
                     uint8_t sk[32], bool *has_sk, char *err, size_t errlen);

/* Read an authorized file into k->auth_* (k->nauth keys).
 * 0 or KVS_ECONFIG with err. */
int keyfile_read_authorized(const char *var, const char *path, keyfile_keys *k, char *err,
                            size_t errlen);

/* The key file paths cfg_load read (KVS_CURVE_SERVER_KEY,
 * KVS_CURVE_CLIENT_KEY, KVS_CURVE_AUTHORIZED; NULL or "": unset). */
typedef struct keyfile_paths {
    const char *server, *client, *authorized;
} keyfile_paths;

/* The files paths names into k (zeroed first), checked against the node's
 * role: listens (scheduler, server: needs the server secret key and the
 * authorized file), connects (server, worker: needs its own key pair); who
 * names the role in messages.  Sets k->files when the server key is given;
 * the other two without it are refused.  0 or KVS_ECONFIG with err. */
int keyfile_load(const keyfile_paths *paths, bool listens, bool connects, const char *who,
                 keyfile_keys *k, char *err, size_t errlen);

#endif
