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

#include "common/topo.h"
#include "kvs.h"

#ifdef __cplusplus
extern "C" {
#endif


/* ---------------------------------------------------------------- topology */
/* (the type, tree_topo, tree_w and tree_link: common/topo.h) */

/* n x n topology with all weights 0.  Returns 0, KVS_EINVAL (n out of range)
 * or KVS_ENOMEM.  Pair with tree_topo_fini(). */
int tree_topo_init(tree_topo *t, int n);
/* Releases t->w; safe on a zeroed or already finished topology. */
void tree_topo_fini(tree_topo *t);

/* Parse a matrix string: rows separated by ';', weights by ',' (spaces and
 * tabs allowed around numbers), e.g. "0,2,2;2,0,3;2,3,0".  Weights are finite
 * numbers >= 0; the matrix must be square with 1..TREE_MAX_N rows.  what
 * names the source in messages (e.g. "KVS_TOPOLOGY").  Initialises t. */
int tree_topo_parse(const char *s, const char *what, tree_topo *t, char *err, size_t errlen);

/* `nvidia-smi topo -m` text (as printed on a terminal: ANSI escapes, NIC
 * rows and columns, CPU/NUMA affinity columns are ignored): NV# -> 1 + #,
 * PIX/PXB/PHB/NODE/SYS -> 1, and MXNet's rule: PCIe pairs become 0 when the
 * NVLink graph alone is connected.  Errors name what, the line, the row and
 * column GPU and the entry.  Initialises t. */
int tree_topo_parse_smi(const char *text, size_t len, const char *what, tree_topo *t, char *err,
                        size_t errlen);

/* A topology file: `nvidia-smi topo -m` text (when it mentions GPU0) or a
 * matrix (rows separated by ';' or line breaks, weights by ',').  what names
 * the source ("KVS_TOPOLOGY" gives "KVS_TOPOLOGY=@path: ..."; NULL: the
 * path).  Initialises t (named after the path). */
int tree_topo_load_file(const char *path, const char *what, tree_topo *t, char *err,
                        size_t errlen);

/* The KVS_TOPOLOGY string of t (rows ';', weights ',', %.17g: integers
 * without a decimal point) into buf (NUL-terminated, cut to len); returns
 * the full length (snprintf style). */
size_t tree_topo_format(const tree_topo *t, char *buf, size_t len);

/* spec: KVS_TOPOLOGY's text (cfg.topology).  *found = false (and t
 * untouched) when NULL or empty; "@FILE" reads tree_topo_load_file(FILE);
 * otherwise parses the matrix string (KVS_ECONFIG naming the variable when
 * malformed). */
int tree_topo_from_spec(const char *spec, tree_topo *t, bool *found, char *err, size_t errlen);

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
 * dlopen, so it works in builds without nvcc: plugin first when not NULL or
 * "" (KVS_CUDA_PLUGIN, as device/cuda.c), then libcudart by name).  raw: no
 * MXNet adjustment.  KVS_EDEVICE with a message when no CUDA runtime or no
 * GPU is found. */
int tree_topo_detect(tree_topo *t, bool raw, const char *plugin, char *err, size_t errlen);
/* The same over the nsel GPUs sel[0..nsel) (KVS_DEVICES; entries may
 * repeat: pairs on one GPU rank above every link).  nsel 0: every GPU. */
int tree_topo_detect_sel(tree_topo *t, bool raw, const char *plugin, int nsel, const int *sel,
                         char *err, size_t errlen);

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
    bool weighted;          /* KVS_TREE_WEIGHTED, 1: several weighted trees per root */
    int max_trees;          /* KVS_TREE_MAX_TREES, 0: 4n; trees of a weighted plan */
    uint64_t min_slice;     /* KVS_TREE_MIN_SLICE, 262144: bytes; smaller slices merge */
} tree_opts;

void tree_opts_default(tree_opts *o);
/* The variables above, from the configuration (cfg_load validated them). */
struct cfg;
void tree_opts_from_cfg(tree_opts *o, const struct cfg *c);

/* Validate KVS_TOPOLOGY's text without keeping it: kvs_create and kvs-server
 * call it at start-up so a bad matrix stops the process there (KVS_ECONFIG
 * naming the variable), not when a tree is first planned. */
int tree_topo_check(const char *spec, char *err, size_t errlen);

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

/* ------------------------------------------------------ weighted plans (v2) */

/* A weighted plan: several trees per root, each carrying an integer share
 * (parts) of a common denominator.  The trees of one root together carry 1/n
 * of the array (their parts sum to denominator / n).  The data path cuts an
 * array into contiguous slices in tree order by cumulative parts and runs
 * every slice along its tree.  A v1 tree set is the plan with one tree per
 * root and parts 1 of n. */
#define TREE_PLAN_QUANTUM 720u  /* parts per root in planned weighted plans */

typedef struct tree_wplan {
    int n;                  /* GPUs */
    int ntrees;             /* sorted by root, then parts descending */
    int rounds;             /* max round over all trees */
    uint32_t denominator;   /* n * parts per root */
    int *root;              /* ntrees */
    uint32_t *parts;        /* ntrees, each >= 1 */
    int *parent;            /* ntrees * n: parent[k*n+v], -1 at the root; owned */
    int *round;             /* ntrees * n: broadcast round in which v receives */
} tree_wplan;

/* Room for ntrees trees of n GPUs (parents -2 = unset, roots -1 unset);
 * KVS_EINVAL (n, ntrees or denominator out of range) or KVS_ENOMEM.  Pair
 * with tree_wplan_fini() (safe on a zeroed plan). */
int tree_wplan_init(tree_wplan *p, int n, int ntrees, uint32_t denominator);
void tree_wplan_fini(tree_wplan *p);
/* Edges of tree k, sorted by (round, parent); room for n-1.  Returns the
 * number written. */
int tree_wplan_edges(const tree_wplan *p, int k, tree_edge *edges);
/* Print the trees as indented drawings with their parts (LOGTREE). */
void tree_wplan_print(const tree_topo *t, const tree_wplan *p, void *file);
/* The v1 set as a plan: one tree per root, parts 1, denominator n. */
int tree_wplan_from_set(const tree_set *s, tree_wplan *out);

/* Plan several weighted trees per root (at most o->max_trees, 0 = 4n): the
 * one-tree-per-root construction of o->mode with o->penalty seeds a packing
 * search that lowers the predicted bottleneck load towards the fractional
 * packing bound (see docs/design/planner.md).  Deterministic.  out is
 * initialised here (fini it on success only).  Errors as tree_plan(). */
int tree_plan_weighted(const tree_topo *t, const tree_opts *o, tree_wplan *out, char *err,
                       size_t errlen);

/* Rules of every tree (tree_validate's, per tree), roots in 0..n-1, parts
 * >= 1, every root's parts summing to denominator / n.  0 or KVS_EINVAL with
 * the first broken rule in err. */
int tree_wplan_validate(const tree_topo *t, const tree_wplan *p, char *err, size_t errlen);
/* Predicted bottleneck load: max over directed links c->p of
 * sum(parts/denominator of the trees whose reduce sends c->p) / w[c][p]
 * (the v1 reduce_load_time for one tree per root).  INFINITY when a tree
 * uses a pair without a link. */
double tree_wplan_load(const tree_topo *t, const tree_wplan *p);

/* The fractional packing bound: the least bottleneck load any weighted set
 * of in-trees (every root carrying 1/n) can reach,
 *   max over nonempty proper S of (n - |S|) / (n * c(S -> V\S)),
 * exact by Edmonds' branching theorem; computed by Dinkelbach's method over
 * minimum cuts.  cut (optional, room for n) gets the members of a worst S
 * (1/0).  KVS_EINVAL when the link graph is disconnected. */
int tree_frac_bound(const tree_topo *t, double *lb, bool *cut, char *err, size_t errlen);

/* The minimum-cost in-tree (spanning arborescence towards the root) of
 * every root: cost[c*n+p] = cost of the link c -> p as used by a reduce
 * (>= 1e300 or not finite: no link).  One root-free Chu-Liu/Edmonds
 * contraction serves all roots (the packing's oracle).  par gets n rows of
 * n parent pointers (row r: the tree of root r, par[r*n+r] = -1).  0,
 * KVS_EINVAL (n out of range, or some GPU cannot reach another) or
 * KVS_ENOMEM. */
int tree_min_intrees(int n, const double *cost, int *par);

/* Slices of count elements of es bytes over the plan's trees: slice k is
 * [off[k], off[k] + len[k]); boundaries follow cumulative parts, rounded
 * down to whole multiples of 64 bytes where es divides 64.  A tree whose
 * slice would be below min_bytes gives its parts to the heaviest tree of its
 * root (so small arrays use one tree per root). */
void tree_wplan_slices(const tree_wplan *p, uint64_t count, size_t es, uint64_t min_bytes,
                       uint64_t *off, uint64_t *len);

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
    int nslices;        /* 1 (one tree), n (slice i along tree i) or a plan's ntrees */
    const tree_wplan *plan; /* borrowed: slices by its parts (NULL: equal slices) */
    uint64_t min_bytes;     /* with plan: smaller slices merge (tree_wplan_slices) */
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

/* The schedule of a weighted plan: tree (>= 0) for the whole array, or -1:
 * slice k along tree k for every tree, cut by tree_wplan_slices(min_bytes)
 * when executed (empty slices are skipped).  p must outlive the schedule. */
int tree_sched_build_plan(const tree_wplan *p, int tree, unsigned phases, uint64_t min_bytes,
                          tree_sched *out);
/* The first (heaviest) tree of root in p, -1 when none. */
int tree_wplan_first(const tree_wplan *p, int root);

/* Slice i of count elements over k slices: [*off, *off + *len). */
void tree_slice(uint64_t count, int k, int i, uint64_t *off, uint64_t *len);

/* A backend moves and sums bytes between the n buffers (the tests' backends:
 * tests/unit/tree_backend_cpu.c, tests/gpu/backend/tree_cuda.cu).  Calls within a stage
 * may run concurrently; stage_end waits for all of them. */
typedef struct tree_backend {
    void *ctx;
    int (*copy)(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes);
    int (*reduce)(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dtype,
                  uint64_t count);
    int (*stage_end)(void *ctx);
} tree_backend;

/* Run sc over bufs[0..n-1] (count elements of dtype each). */
int tree_exec(const tree_sched *sc, const tree_backend *be, void *const *bufs, kvs_dtype dtype,
              uint64_t count);

/* All-reduce bufs along s: split over all trees when count >
 * o->array_bound, else along tree root.  Returns 0 or a KVS_* code. */
int tree_allreduce(const tree_set *s, const tree_opts *o, const tree_backend *be,
                   void *const *bufs, kvs_dtype dtype, uint64_t count, int root);

/* tree_allreduce over a weighted plan: every tree, slices by parts (and
 * o->min_slice), when count > o->array_bound; else root's first tree. */
int tree_allreduce_plan(const tree_wplan *p, const tree_opts *o, const tree_backend *be,
                        void *const *bufs, kvs_dtype dtype, uint64_t count, int root);

#ifdef __cplusplus
}
#endif

#endif
