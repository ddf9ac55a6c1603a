/* datapath.h - sizes that the worker and the server must agree on, or that
 * several files of one side share.  One place, so they cannot drift apart.
 * (KVS_CHUNK_BYTES, the message size large parts are cut into, is a run-time
 * setting in common/config.h; its default is DP_CHUNK_BYTES_DEFAULT.) */
#ifndef KVS_COMMON_DATAPATH_H
#define KVS_COMMON_DATAPATH_H

#include "common/prio.h" /* PRIO_AUTO */

/* Worker: a body at least this big is handed to ZeroMQ by reference (zero
 * copy; the op stays pending until ZeroMQ releases the frame); smaller
 * bodies are copied into the message. */
#define DP_ZERO_COPY_MIN (64u << 10)

/* Worker and server: data at least this big goes by same-host direct copy
 * (KVS_CMA) when the server proved it can; smaller data travels inline.
 * Below DP_FUSE_MAX such parts still leave fused, as records by reference
 * of a FUSED_REF: from 16 KiB on, one process_vm_readv/writev each costs
 * less than the four copies and the socket bytes of an inline record and
 * its answer (with 64 KiB, the 16-64 KiB keys of a 200-key round were a
 * quarter of its socket traffic's CPU on 2x2: docs/design/data-path.md). */
#define DP_CMA_MIN (16u << 10)

/* Server: the first push of a round at least this big becomes the round
 * buffer (no copy); smaller pushes are copied into a reused buffer. */
#define DP_ADOPT_MIN (64u << 10)

/* Server: values it allocates for inits and loads of at least this size
 * are mappings of their own, returned to the kernel when freed.  The
 * daemons keep freed heap memory for reuse (common/memtune.h), and on the
 * socket path the first round's received frames (from ZeroMQ's thread's
 * heap) replace those values: in the heap, their memory would stay resident
 * for the process's life, a third copy of the values. */
#define DP_MAP_MIN (1u << 20)

/* Server: direct copies from this size are split over the reduction pool in
 * pieces of DP_CMA_PAR_CHUNK bytes. */
#define DP_CMA_PAR_MIN (1u << 20)
#define DP_CMA_PAR_CHUNK (256u << 10)

/* Server: entries (key parts) of at least this many bytes are summed,
 * updated and copied by jobs off the loop (server/jobs.h); smaller ones on
 * the loop, where a job would cost more than the work. */
#define DP_OFFLOAD_MIN (64u << 10)

/* The same, where the job's servers on this host are at least its CPUs
 * (no core is left for a job to run beside the loops): parts up to 256 KiB
 * stay on the loop, whose hand-offs to a job and back would cost more than
 * the parallelism gives.  Not more: the loop sums in arrival order, so a
 * part of high priority that arrives behind them waits for them (1 MiB
 * delayed resnet50's first layer 5x; docs/design/data-path.md). */
#define DP_OFFLOAD_MIN_CROWDED ((256u << 10) + 1)

/* Worker: key parts smaller than this (to one server, in one wake-up of the
 * I/O thread) are fused into PROTO_FUSED messages of at most KVS_FUSE_BYTES
 * (default DP_FUSE_BYTES_DEFAULT).  Equal to DP_ZERO_COPY_MIN: a fused part
 * is copied into its message, unless it goes by reference (DP_CMA_MIN and
 * up, same host; then its record names its buffers). */
#define DP_FUSE_MAX (64u << 10)
#define DP_FUSE_BYTES_DEFAULT (256u << 10)
/* Worker: parts from DP_FUSE_MAX up to below this that travel inline leave
 * fused too, their data not copied but lent as record frames of the FUSED
 * message (PROTO_F_FRAME), at most this many bytes of such parts (sent or
 * answered) in one message: ZeroMQ wakes its reader once per message, and
 * parts of 64-256 KiB that left one message each cost a 200-key round on
 * 1x1 sockets ~1.4x one key of the same bytes (docs/design/data-path.md);
 * 1 MiB messages cost no more than 4 MiB ones. */
#define DP_FUSE_FRAMES_MAX (1u << 20)
/* Server: a FUSED_REPLY being collected is sent once it holds this much. */
#define DP_FUSE_REPLY_FLUSH (1u << 20)

/* Worker, p3: default of KVS_P3_CREDIT, the bytes a worker lets ZeroMQ hold
 * for one server before a later (higher-priority) request can overtake. */
#define DP_P3_CREDIT_DEFAULT (2u << 20)

/* Worker and server: the largest frame a server's data socket accepts
 * (ZMQ_MAXMSGSIZE, so before authentication a peer can make a server
 * buffer at most this much of one frame); a worker sends a bigger body as
 * several frames of one message (pieces of its buffer, no copy), and the
 * server sums them piece by piece.  KVS_MAX_MESSAGE bounds the whole body. */
#define DP_FRAME_MAX (4u << 20)

/* Worker and server: the longest checkpoint directory a save or load names
 * (the worker refuses longer ones before asking; the server checks again). */
#define DP_CKPT_DIR_MAX 3000

/* Server: default of KVS_JOB_NICE, the scheduling of the threads that sum,
 * copy and update off the loop (jobs and the reduction pool), so the loop
 * and ZeroMQ's I/O threads run first when they wake: small requests are
 * answered while big sums run.  PRIO_AUTO (common/prio.h): SCHED_IDLE,
 * raised to niceness PRIO_AUTO_NICE (10) while other processes starve them;
 * niceness 10 where the process may not leave SCHED_IDLE. */
#define DP_JOB_NICE_DEFAULT PRIO_AUTO

/* Worker, a local group that is the whole job: the bytes of group sums
 * one member keeps in flight (summed and sent, not yet answered); at least
 * one chunk always goes.  Each holds a buffer of its size, and on the
 * sockets a pushpull's answer a message of its size too: this bounds what
 * a member holds beyond its own arrays (two default chunks), while the
 * next chunk's sum overlaps the previous one's trip.  (With other hosts in
 * the job there is no bound: worker/group.c says why.) */
#define DP_GROUP_INFLIGHT (8u << 20)

/* Default of KVS_CHUNK_BYTES: parts above it travel as several messages. */
#define DP_CHUNK_BYTES_DEFAULT (4u << 20)

#endif
