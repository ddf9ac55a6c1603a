/* ckpt.h - checkpoint files: one per server, written durably, read whole
 * and verified before anything is applied.
 *
 * File <dir>/server-<rank>.kvsckpt, format version 1, little-endian:
 *
 *   header, 64 bytes
 *      0  8  magic "KVSCKPT1"          8 u32 format version (1)
 *     12 u32 server rank              16 u32 number of servers
 *     20 u32 number of workers        24 u64 save id (the same in every
 *                                            server's file of one save)
 *     32 u64 number of entries        40 u64 file length in bytes, trailer included
 *     48 u32 flags: 1 optimizer set, 2 optimizer active (updates on the servers)
 *     52 u32 spec length L (< 1024)   56 u32 number of key multipliers M
 *     60 u32 0
 *   the optimizer spec, L bytes (canonical text, no NUL)
 *   M multipliers, 24 bytes each: u64 key, f64 lr_mult, f64 wd_mult
 *   per entry (key part), an 80-byte header
 *      0 u64 key      8 u32 part     12 u32 dtype    16 u64 count
 *     24 u64 offset  32 u64 total    40 u64 completed rounds
 *     48 u64 updates applied (Adam's t, the schedule's count)
 *     56 u32 flags: 1 dist_async key, 2 has optimizer state, 4 master copy valid
 *     60 u32 number of state arrays S   64 u64 value bytes (count * dtype size)
 *     72 u32 dtype of the state arrays   76 u32 0
 *   then the value, then S state arrays of count elements each (momenta,
 *   Adam's m then v, ..., the float32 master copy last)
 *   trailer, 16 bytes: "KVSCKEND", u32 CRC-32C of every byte before the
 *   trailer, u32 0.
 *
 * Writing: to "<dir>/.server-<rank>.kvsckpt.tmp", fsync; then (once every
 * server wrote its temporary: kvs_save is two collectives) rename over the
 * final name and fsync the directory: a crash at any point leaves the
 * previous file whole.  Reading checks the magic, the version, every size against the
 * file's length before allocating, and the checksum; any failure is
 * KVS_EPROTO naming the file, and nothing is returned.
 *
 * Threads: both functions run on any thread; they touch only their
 * arguments (the caller keeps the entries unchanged while a write runs).
 */
#ifndef KVS_SERVER_CKPT_H
#define KVS_SERVER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store.h"
#include "server/update.h"

#define CKPT_VERSION 1

typedef struct srv_ckpt_meta {
    uint64_t save_id;
    uint32_t rank, num_servers, num_workers;
} srv_ckpt_meta;

/* One key part read from a file. */
typedef struct srv_ckpt_part {
    uint64_t key;
    uint32_t part;
    kvs_dtype dtype;
    uint64_t count, offset, total, round;
    bool async;
    srv_buf *value;
    srv_upd *upd; /* NULL when the file has no state for it */
} srv_ckpt_part;

typedef struct srv_ckpt {
    srv_ckpt_meta meta;
    char path[4200];
    bool spec_set, active;
    char spec[OPTIM_TEXT_MAX];
    size_t nmults;
    uint64_t *mult_keys;
    optim_mult *mults;
    size_t n;
    srv_ckpt_part *parts;
} srv_ckpt;

/* The file name of server rank's part in dir. */
void srv_ckpt_path(const char *dir, uint32_t rank, char *buf, size_t len);

/* Write entries v[0..n) and the optimizer o (may be NULL) to the temporary
 * file and fsync it; with commit, also srv_ckpt_commit().  Creates dir (and
 * its parents) if missing.  Returns 0, or KVS_EINVAL / KVS_ENOMEM with why
 * (naming the file and the system error); on error no temporary is left. */
int srv_ckpt_write(const char *dir, const srv_ckpt_meta *meta, const srv_entry_view *v,
                   size_t n, const srv_optim *o, bool commit, char *why, size_t whylen);
/* Rename the written temporary over the final name and fsync dir. */
int srv_ckpt_commit(const char *dir, uint32_t rank, char *why, size_t whylen);
/* Remove the temporary (a save another server could not make). */
void srv_ckpt_abort(const char *dir, uint32_t rank);

/* Read and verify server rank's file in dir into *out.  Returns 0, or
 * KVS_EPROTO (missing, truncated, corrupted, another format), KVS_ENOMEM,
 * with why naming the file; on error *out is empty. */
int srv_ckpt_read(const char *dir, uint32_t rank, srv_ckpt *out, char *why, size_t whylen);

void srv_ckpt_free(srv_ckpt *c);

/* CRC-32C (Castagnoli) of len bytes continuing from crc (start with 0). */
uint32_t srv_crc32c(uint32_t crc, const void *data, size_t len);

#endif
