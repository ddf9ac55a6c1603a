/* group.h - local groups and per-host aggregation in libkvs (private to
 * worker/).
 *
 * The workers of one host (the same registered address and pid namespace,
 * scheduler/sched.c) form a local group; each has a local rank and size.
 * With aggregation on (KVS_LOCAL_AGG: default for dist_sync), a push or
 * pushpull of a key is done by the group together: every chunk of the key
 * (worker/route.c) has one owner among the members, spread by (key + chunk)
 * mod size; the owner reads the other members' data for its chunks straight
 * from their memory (process_vm_readv, after checking each member's
 * ownership proof from the node table), sums it, pushes the sum once as a
 * push that stands for the whole group (proto.h contrib), and writes the
 * round's value into every member's output (process_vm_writev); a member
 * whose data is in shared device memory (wrk_grp_dev) is read and written
 * with device copies instead, and the sum is made on the owner's device
 * (the comm layer's wrk_grp_devops).  A plain pull of a sync store (host
 * memory: the comm layer's arrays through their pinned copies) goes the
 * same way without the sum: the owner
 * pulls its chunk once per key and round, gives it to every member's pull
 * of that round and keeps it (bounded) for members that pull later.
 * Keys under KVS_LOCAL_AGG_MIN bytes (its default by layout: group.c) skip
 * the group: each member sends its own (contrib 1) from the calling thread;
 * a call of only such keys is a plain wrk_submit.
 *
 * The members meet in a small shared-memory segment: per member a ring of
 * posted keys (key, round, addresses, chunks left) and a log of its pulls;
 * nothing else crosses it.
 * Each store of a group member runs one group thread that starts its owned
 * chunks (by priority, highest first; in posting order among equals and
 * within a key), fans out their results, and completes its own operations; every
 * wait there is bounded and ends when the job fails (KVS_EPEERDEAD) or a
 * member leaves.
 *
 * Threads: wrk_grp_config, wrk_grp_start, wrk_grp_submit, wrk_grp_stop run
 * on user threads (start and stop from kvs_create / kvs_close only);
 * wrk_grp_table on the I/O thread before registration completes. */
#ifndef KVS_WORKER_GROUP_H
#define KVS_WORKER_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/dev_opts.h"
#include "kvs.h"
#include "proto/proto.h"

struct kvs_store;
typedef struct wrk_grp wrk_grp;

/* Read KVS_LOCAL_RANK, KVS_LOCAL_SIZE (or torchrun's LOCAL_RANK,
 * LOCAL_WORLD_SIZE) and KVS_LOCAL_AGG for a dist store, and prepare what the
 * worker registers with (s->grp_reg).  Device arrays aggregate through the
 * comm layer (comm.c): dist_* each array's pinned host copy, dist_*_device
 * each key's in-process sum in shared device memory (wrk_grp_dev).  0, or
 * KVS_ECONFIG with one
 * line naming the variable in err. */
int wrk_grp_config(struct kvs_store *s, char *err, size_t errlen);

/* The node table arrived: take this worker's local rank and size, its
 * group's members and, when KVS_LOCAL_AGG_MIN was not given, the floor for
 * this layout.  0, or KVS_EPROTO with why. */
int wrk_grp_table(struct kvs_store *s, const proto_node *nodes, int n, uint64_t job_id,
                  char *why, size_t whylen);

/* After registration: with aggregation on and more than one member, check
 * every member's proof, meet them in shared memory and start the group
 * thread.  0 or an error (message set). */
int wrk_grp_start(struct kvs_store *s);

/* True if pushes and pushpulls of s go through its group (and, in a sync
 * store, plain pulls: of host arrays, and the comm layer's pinned copies). */
bool wrk_grp_on(const struct kvs_store *s);

/* An init or a checkpoint load of s starts: the values this member keeps
 * for the group's late pulls (which the servers may be about to replace)
 * are not given any more.  User thread. */
void wrk_grp_forget(struct kvs_store *s);

/* True if a key of bytes skips the group (under KVS_LOCAL_AGG_MIN): each
 * member sends its own. */
bool wrk_grp_solo(const struct kvs_store *s, uint64_t bytes);

/* ---- parts in device memory: the group asks the comm layer ---- */

/* One member's part of a chunk: */
enum {
    WRK_DEVP_OWN = 1, /* p: our device memory (on dev), the chunk at p + off */
    WRK_DEVP_PEER,    /* another process's (pid, h): the chunk at off of its buffer */
    WRK_DEVP_HOST     /* p: the chunk in host memory of this process */
};
typedef struct wrk_dev_part {
    int kind;
    int pid;
    const dev_ipc *h;
    void *p;
} wrk_dev_part;

/* The comm layer's device work for the group (comm.c sets s->grp_devops
 * when it is made; the group names nothing of comm.c).  Both take the comm
 * lock; any thread but the I/O thread.  KVS_E* with a message.
 *   sum  out (host, bytes) = the sum over in[0..n) (in that order, as
 *        red_sum) of bytes [off, off + bytes) of a key of dtype dt, summed
 *        on dev (-1: device 0): peers' parts and host parts are copied to
 *        dev first (dev_ipc_copy, dev_copy); out NULL: the sum replaces
 *        in[0]'s bytes (an OWN part on dev) and stays on the device;
 *   put  val (host, bytes) to bytes [off, off + bytes) of every OWN and
 *        PEER part of to[0..n) (HOST parts are the caller's), through dev
 *        (-1: device 0);
 *   plan the trees over n members whose parts are on the host's devices
 *        ord[0..n) (backend ordinals; equal ones share a GPU), one per root
 *        (tree_plan, MXNET_KVSTORE_USETREE=1): parent[r * n + v] is v's
 *        parent in the tree rooted at r (-1 for r).  Every member with the
 *        same host topology (wrk_grp_dev.thash) plans the same trees. */
struct wrk_comm;
typedef struct wrk_grp_devops {
    int (*sum)(struct wrk_comm *c, int dev, kvs_dtype dt, const wrk_dev_part *in, int n,
               uint64_t off, uint64_t bytes, void *out);
    int (*put)(struct wrk_comm *c, int dev, const void *val, uint64_t off, uint64_t bytes,
               const wrk_dev_part *to, int n);
    int (*plan)(struct wrk_comm *c, int n, const int *ord, int *parent);
} wrk_grp_devops;

/* A key's sum in device memory that can be shared (comm.c, dist_*_device):
 * the owner of each chunk copies the members' chunks to its own device
 * (CUDA IPC; simulated: shared memory), sums them there, pushes the sum
 * from host memory, and copies the round's value back into every member's
 * buffer; nothing of the key is staged to host memory but the owned
 * chunks.  With trees (every member's thash equal and not 0, three members
 * or more) each chunk is summed along the tree rooted at its owner over the
 * members' devices (devops plan): a member adds its children's partial
 * sums into its own buffer, in place, and its parent reads them from
 * there; the owner adds its children's and pushes. */
typedef struct wrk_grp_dev {
    bool on;   /* false: the key is in host memory (vals / outs) */
    int dev;   /* the comm layer's device that holds p */
    void *p;   /* the sum, whole; the round's value lands here (a pushpull) */
    dev_ipc h; /* p's handle for the other members */
    int ord;   /* dev's backend ordinal: which of the host's devices */
    uint64_t thash; /* trees across the group: the host topology's hash; 0: none */
} wrk_grp_dev;

/* A push (outs NULL), pushpull or pull (type WRK_OP_PULL, vals NULL) of
 * host arrays through the group; arguments checked.  Asynchronous like
 * kvs_push: completes at kvs_wait.
 * ops and owner (NULL: none) become the op's owner (op.h), as with
 * wrk_submit: the comm layer's device arrays are summed by the group from
 * their pinned host copies, or from device memory (dv: NULL, or per key of
 * keys, which are then distinct; a key with dv[i].on has vals[i].data and
 * outs[i].data NULL), and go back to the devices in its post step.  On
 * an error return the caller still owns owner; else the op does. */
struct wrk_op_ops;
int wrk_grp_submit(struct kvs_store *s, int type, size_t n, const uint64_t *keys,
                   const kvs_array *vals, const kvs_array *outs, const wrk_grp_dev *dv,
                   int priority, const struct wrk_op_ops *ops, void *owner);

/* Stop the group thread (after every op completed or failed) and leave the
 * group: members still waiting for this one's keys fail, and pull
 * themselves what it did not serve of their pulls.  If chunks it pulls for
 * them are still in flight, s keeps the group's memory until a second call
 * once the I/O thread has stopped (kvs_close makes both). */
void wrk_grp_stop(struct kvs_store *s);

#endif
