/* tree.h - topology-aware reduction trees for multi-GPU nodes.
 *
 * A topology is an N x N matrix of directed link weights (w[i*n+j] = speed of
 * the link i -> j; 0 = no link; higher = faster).  The planner builds one
 * spanning tree per root GPU.  A tree is stored as parent pointers plus the
 * broadcast round in which each GPU receives (root: round 0).  Broadcast runs
 * rounds 1..R from the root; reduce runs them in reverse (children send to
 * their parents, each child in the reverse of its broadcast round).
 *
 * Rules every planned tree obeys (tree_validate() checks them):
 *  - every GPU is reached exactly once; the root is never a child;
 *  - a GPU sends only after it has the data: round[child] > round[parent];
 *  - per round a GPU sends at most once and receives at most once (the
 *    children of one parent have distinct rounds);
 *  - an edge parent-child needs w[parent][child] > 0 and w[child][parent] > 0
 *    (the tree is used in both directions).
 *
 * Planning = per-root construction (Kernighan-Lin recursive bisection, or
 * backtracking) with the link-usage penalty applied per *directed* link after
 * each tree, then a joint local search over all N trees that minimises, in
 * this order: reduce_load_time, the number of directed links at that load,
 * -(sum of per-tree bottlenecks), directed congestion, the number of links at
 * that congestion, the sum of squared loads, the total depth.  The search is
 * deterministic (fixed seed, work budget in moves, never wall-clock).
 *
 * Module rules: pure C, no threads, no sockets, no global mutable state.
 * Every function may be called from any thread on objects the caller owns;
 * nothing is shared between calls.  Errors: KVS_* codes from kvs.h, with one
 * human-readable line in err (naming the variable, file position or GPU).
 */
#ifndef KVS_TREE_H
#define KVS_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TREE_MAX_N 64       /* GPUs per node the planner accepts */
#define TREE_NAME_MAX 128   /* topology name, including the NUL */

/* ---------------------------------------------------------------- topology */

typedef struct tree_topo {
    int n;                      /* GPUs, 1..TREE_MAX_N */
    double *w;                  /* n*n, row-major, owned; diagonal ignored */
    char name[TREE_NAME_MAX];   /* "" when unnamed */
} tree_topo;

/* n x n topology with all weights 0.  Returns 0, KVS_EINVAL (n out of range)
 * or KVS_ENOMEM.  Pair with tree_topo_fini(). */
int tree_topo_init(tree_topo *t, int n);
/* Releases t->w; safe on a zeroed or already finished topology. */
void tree_topo_fini(tree_topo *t);

static inline double tree_w(const tree_topo *t, int i, int j)
{
    return i == j ? 0.0 : t->w[(size_t)i * (size_t)t->n + (size_t)j];
}

/* A usable link joins i and j when both directions have weight > 0. */
static inline bool tree_link(const tree_topo *t, int i, int j)
{
    return i != j && tree_w(t, i, j) > 0 && tree_w(t, j, i) > 0;
}

/* Parse a matrix string: rows separated by ';', weights by ',' (spaces and
 * tabs allowed around numbers), e.g. "0,2,2;2,0,3;2,3,0".  Weights are finite
 * numbers >= 0; the matrix must be square with 1..TREE_MAX_N rows.  what
 * names the source in messages (e.g. "KVS_TOPOLOGY").  Initialises t. */
int tree_topo_parse(const char *s, const char *what, tree_topo *t, char *err, size_t errlen);

/* KVS_TOPOLOGY: *found = false (and t untouched) when unset or empty;
 * otherwise parses it (KVS_ECONFIG naming the variable when malformed). */
int tree_topo_from_env(tree_topo *t, bool *found, char *err, size_t errlen);

/* Read {"topologies": [{"name": S, "n": N, "weights": [[...], ...]}, ...]}
 * (strict JSON).  On success *list (array of *count topologies, owned by the
 * caller, free with tree_topo_list_free) .  Errors name the file, the line
 * and column or the topology index. */
int tree_topo_load_json(const char *path, tree_topo **list, int *count, char *err, size_t errlen);
int tree_topo_parse_json(const char *text, size_t len, const char *what, tree_topo **list,
                         int *count, char *err, size_t errlen);
void tree_topo_list_free(tree_topo *list, int count);

/* MXNet's adjustment of a CUDA matrix.  rank[i*n+j] = PerformanceRank + 1 for
 * peer-capable pairs (PCIe = 1, NVLink > 1), 0 otherwise.  If the graph of
 * links with rank > 1 is connected, PCIe links get weight 0, else 1/n;
 * NVLink weights are the ranks.  Initialises t. */
int tree_topo_from_ranks(int n, const int *rank, tree_topo *t);

/* The matrix of this machine's GPUs through the CUDA runtime (loaded with
 * dlopen, so it works in builds without nvcc).  raw: no MXNet adjustment.
 * KVS_EDEVICE with a message when no CUDA runtime or no GPU is found. */
int tree_topo_detect(tree_topo *t, bool raw, char *err, size_t errlen);

/* 0 when every GPU can reach GPU 0 over usable links; otherwise KVS_EINVAL
 * and "link graph is disconnected: GPUs 2, 3 cannot be reached from GPU 0". */
int tree_topo_check_connected(const tree_topo *t, char *err, size_t errlen);

/* Write the matrix (one row a line) to f, for MXNET_KVSTORE_LOGTREE. */
void tree_topo_print(const tree_topo *t, void *file);

/* ----------------------------------------------------------------- options */

typedef enum tree_mode { TREE_MODE_KL = 0, TREE_MODE_BACKTRACK = 1 } tree_mode;

typedef struct tree_opts {
    tree_mode mode;         /* MXNET_KVSTORE_TREE_BACKTRACK (0: KL) */
    double penalty;         /* MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY, (0, 1], 0.7 */
    bool log;               /* MXNET_KVSTORE_LOGTREE */
    uint64_t array_bound;   /* MXNET_KVSTORE_TREE_ARRAY_BOUND, 10000000 */
    bool gpu_p2p;           /* MXNET_ENABLE_GPU_P2P, 1 */
    bool optimize;          /* KVS_TREE_OPTIMIZE, 1: joint local search */
    uint64_t effort;        /* KVS_TREE_EFFORT, 100: search budget in percent */
    int depth_slack;        /* KVS_TREE_DEPTH_SLACK, 1: extra rounds allowed when they
                               lower reduce_load_time (0 or 1) */
} tree_opts;

void tree_opts_default(tree_opts *o);
/* Defaults, then the variables above.  KVS_ECONFIG naming the variable. */
int tree_opts_from_env(tree_opts *o, char *err, size_t errlen);

/* Validate every tree and GPU variable (the options above and KVS_TOPOLOGY)
 * without keeping them: kvs_create and kvs-server call it at start-up so a
 * bad value stops the process there (KVS_ECONFIG naming the variable, the
 * value and what is allowed), not when a tree is first planned. */
int tree_env_check(char *err, size_t errlen);

/* ------------------------------------------------------------------- trees */

typedef struct tree_edge {
    int parent, child, round;  /* broadcast: parent -> child in round */
} tree_edge;

typedef struct tree_set {
    int n;          /* GPUs; tree t is rooted at GPU t */
    int rounds;     /* max round over all trees */
    int *parent;    /* n*n: parent[t*n+v], -1 for v == t; owned */
    int *round;     /* n*n: broadcast round in which v receives in tree t */
} tree_set;

int tree_set_init(tree_set *s, int n);
void tree_set_fini(tree_set *s);
int tree_set_copy(tree_set *dst, const tree_set *src);   /* dst initialised */

/* Plan one tree per root.  out is initialised here (fini it on success
 * only).  Errors: KVS_EINVAL (disconnected: names the unreachable GPUs),
 * KVS_ENOMEM.  With o->log the matrix and trees go to stderr. */
int tree_plan(const tree_topo *t, const tree_opts *o, tree_set *out, char *err, size_t errlen);

/* The reference planner: MXNet's per-root greedy procedure (recursive
 * bisection with an undirected link penalty, no joint search).  Used to show
 * that tree_plan() never does worse.  Same contract as tree_plan(). */
int tree_plan_mxnet_like(const tree_topo *t, const tree_opts *o, tree_set *out, char *err,
                         size_t errlen);

/* Edges of tree root, sorted by (round, parent).  edges has room for n-1.
 * Returns the number written. */
int tree_set_edges(const tree_set *s, int root, tree_edge *edges);

/* Set tree root from an edge list (as read from JSON).  Checks ids and shape
 * only; use tree_validate() for the rules. */
int tree_set_from_edges(tree_set *s, int root, const tree_edge *edges, int nedges, char *err,
                        size_t errlen);

/* Print the trees as indented drawings (MXNET_KVSTORE_LOGTREE, kvs-topo). */
void tree_set_print(const tree_topo *t, const tree_set *s, void *file);

/* ----------------------------------------------------------------- quality */

typedef struct tree_score {
    bool valid;                     /* all rules hold, including links */
    char error[256];                /* first broken rule, "" when valid */
    int nonlink_edges;              /* edges over pairs without a usable link */
    int rounds;                     /* max round */
    double bottleneck[TREE_MAX_N];  /* per tree: min over edges of min(w[p][c], w[c][p]) */
    double bottleneck_sum;
    int congestion;                 /* most trees sending over one directed link (reduce) */
    double reduce_load_time;        /* max over directed links of trees/weight, / n */
} tree_score;

/* Structural rules (shape, rounds) and links; 0 or KVS_EINVAL with the first
 * broken rule in err. */
int tree_validate(const tree_topo *t, const tree_set *s, char *err, size_t errlen);
void tree_score_compute(const tree_topo *t, const tree_set *s, tree_score *out);
/* <0 when a is better than b (lexicographic: validity, load, bottleneck sum,
 * congestion, rounds). */
int tree_score_cmp(const tree_score *a, const tree_score *b);

/* ---------------------------------------------------------------- schedule */

typedef enum tree_op {
    TREE_OP_COPY = 0,    /* buf[dst] = buf[src] on the slice */
    TREE_OP_REDUCE = 1   /* buf[dst] += buf[src] on the slice */
} tree_op;

typedef struct tree_step {
    int op;       /* tree_op */
    int slice;    /* which slice of the array (== tree index when split; 0 else) */
    int src, dst; /* GPUs */
} tree_step;

#define TREE_PHASE_REDUCE 1u
#define TREE_PHASE_BCAST 2u

typedef struct tree_sched {
    int n;              /* GPUs */
    int nslices;        /* 1 (one tree) or n (slice i along tree i) */
    int nstages;        /* steps within a stage are independent */
    int *stage_start;   /* nstages + 1 offsets into steps */
    tree_step *steps;
    int nsteps;
} tree_sched;

/* Build the schedule of root's tree (root >= 0: whole array) or of all trees
 * (root == -1: slice i along tree i, all at once).  phases: TREE_PHASE_*.
 * Reduce leaves the sum in the root of each slice's tree (other buffers hold
 * partial sums); broadcast copies it to every GPU. */
int tree_sched_build(const tree_set *s, int root, unsigned phases, tree_sched *out);
void tree_sched_fini(tree_sched *sc);

/* Slice i of count elements over k slices: [*off, *off + *len). */
void tree_slice(uint64_t count, int k, int i, uint64_t *off, uint64_t *len);

/* A backend moves and sums bytes between the n buffers.  Calls within a stage
 * may run concurrently; stage_end waits for all of them. */
typedef struct tree_backend {
    void *ctx;
    int (*copy)(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes);
    int (*reduce)(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dtype,
                  uint64_t count);
    int (*stage_end)(void *ctx);
} tree_backend;

struct red_pool;
/* Host buffers summed with red_add() (pool may be NULL). */
void tree_backend_cpu(struct red_pool *pool, tree_backend *out);

/* Run sc over bufs[0..n-1] (count elements of dtype each). */
int tree_exec(const tree_sched *sc, const tree_backend *be, void *const *bufs, kvs_dtype dtype,
              uint64_t count);

/* All-reduce bufs along s: split over all trees when count >
 * o->array_bound, else along tree root.  Returns 0 or a KVS_* code. */
int tree_allreduce(const tree_set *s, const tree_opts *o, const tree_backend *be,
                   void *const *bufs, kvs_dtype dtype, uint64_t count, int root);

/* CUDA backend (tree/cuda.cu; only in libkvs_cuda.a, built where nvcc is
 * found).  devices[i] = CUDA device of buffer i; bytes = largest array.
 * Peer copies (cudaMemcpyPeerAsync) where p2p and cudaDeviceCanAccessPeer,
 * else staged through pinned host memory. */
int tree_backend_cuda_new(int n, const int *devices, uint64_t bytes, bool p2p, tree_backend *out,
                          char *err, size_t errlen);
void tree_backend_cuda_free(tree_backend *be);

#ifdef __cplusplus
}
#endif

#endif
