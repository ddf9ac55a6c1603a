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
 * Writing a file: to "<d>/.server-<rank>.kvsckpt.tmp", fsync, rename over
 * the final name, fsync <d> (and <d>'s parent, which may have just got <d>):
 * a crash at any point leaves either no file or a whole one.  Reading checks
 * the magic, the version, every size against the file's length before
 * allocating, and the checksum; any failure is KVS_EPROTO naming the file,
 * and nothing is returned.
 *
 * Generations and the manifest (what makes a save of S servers atomic):
 * a checkpoint directory D holds generations, D/gen-<G>/ (G > 0, printed
 * with at least 12 digits), each with one file per server as above, and
 * one manifest per server, D/server-<rank>.manifest: the generations that
 * server holds *committed*, newest first.  A generation is committed on a
 * server only once every server's file of it is durable (kvs_save's second
 * phase), and the files of older generations are removed only once the new
 * one is committed on every server (the third phase).  So after a crash at
 * any point some generation is committed on every server, and kvs_load
 * takes the newest such one.  The manifest is text, written like a file
 * above (".server-<rank>.manifest.tmp", fsync, rename, fsync D):
 *
 *   kvsd-manifest 1
 *   server <rank>
 *   gen <G> <save id, 16 hex digits>      (1 to CKPT_MAN_MAX lines, newest first)
 *   crc <CRC-32C of the lines above, 8 hex digits>
 *
 * Threads: every function runs on any thread; they touch only their
 * arguments (the caller keeps the entries unchanged while a write runs).
 */
#ifndef KVS_SERVER_CKPT_H
#define KVS_SERVER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/buf.h"
#include "server/view.h"
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

#define CKPT_MAN_MAX 8 /* generations one manifest names, at most */

/* A server's manifest: the generations it holds committed, newest first. */
typedef struct srv_ckpt_man {
    bool exists;          /* the file was there */
    int n;
    uint64_t gen[CKPT_MAN_MAX], id[CKPT_MAN_MAX];
} srv_ckpt_man;

/* "<dir>/gen-<G>" */
void srv_ckpt_gen_dir(const char *dir, uint64_t gen, char *buf, size_t len);
/* Read server rank's manifest in dir: 0 with m->exists false when there is
 * none; KVS_EPROTO with why naming the file when it is not a valid one. */
int srv_ckpt_man_read(const char *dir, uint32_t rank, srv_ckpt_man *m, char *why,
                      size_t whylen);
/* Replace server rank's manifest in dir durably with m (0..CKPT_MAN_MAX
 * generations, newest first; 0 removes it).  Returns 0 or KVS_EINVAL with
 * why. */
int srv_ckpt_man_write(const char *dir, uint32_t rank, const srv_ckpt_man *m, char *why,
                       size_t whylen);
/* The highest G of any dir/gen-<G> (0: none). */
uint64_t srv_ckpt_gen_max(const char *dir);
/* Remove server rank's file (and temporary) of every dir/gen-<G> whose G is
 * not in keep[0..nkeep) and is below below (UINT64_MAX: any), and the
 * generation's directory when it is empty then. */
void srv_ckpt_prune(const char *dir, uint32_t rank, const uint64_t *keep, int nkeep,
                    uint64_t below);

/* The file name of server rank's part in dir. */
void srv_ckpt_path(const char *dir, uint32_t rank, char *buf, size_t len);

/* Write entries v[0..n) and the optimizer o (may be NULL) to the temporary
 * file and fsync it; with commit, also srv_ckpt_commit().  Creates dir (and
 * its parents) if missing, and makes its entry durable.  Returns 0, or KVS_EINVAL / KVS_ENOMEM with why
 * (naming the file and the system error); on error no temporary is left. */
int srv_ckpt_write(const char *dir, const srv_ckpt_meta *meta, const srv_entry_view *v,
                   size_t n, const srv_optim *o, bool commit, char *why, size_t whylen);
/* Rename the written temporary over the final name and fsync dir. */
int srv_ckpt_commit(const char *dir, uint32_t rank, char *why, size_t whylen);

/* Read and verify server rank's file in dir into *out.  The job's keys at
 * this server are max_parts key parts holding at most max_bytes bytes of
 * values: a file declaring more entries, or values past that, is refused
 * before anything of that size is allocated (a sparse file can declare far
 * more than it holds).  Returns 0, or KVS_EPROTO (missing, truncated,
 * corrupted, another format), KVS_ESHAPE (more than the job's keys),
 * KVS_ENOMEM, with why naming the file; on error *out is empty. */
int srv_ckpt_read(const char *dir, uint32_t rank, uint64_t max_parts, uint64_t max_bytes,
                  srv_ckpt *out, char *why, size_t whylen);

void srv_ckpt_free(srv_ckpt *c);

/* CRC-32C (Castagnoli) of len bytes continuing from crc (start with 0). */
uint32_t srv_crc32c(uint32_t crc, const void *data, size_t len);

#endif
