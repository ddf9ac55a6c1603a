/* tree_int.h - private to tree/: the JSON reader and planner internals. */
#ifndef KVS_TREE_INT_H
#define KVS_TREE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tree/json.h"
#include "tree/tree.h"

/* ---------------------------------------------------------------- planner */

/* Deterministic PRNG (xorshift64*). */
static inline uint64_t tree_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Given parent pointers of one tree (par[root] = -1), assign optimal
 * broadcast rounds (children sorted by the time their subtree needs, longest
 * first).  Returns the depth, or -1 when par is not a spanning tree of root. */
int tree_assign_rounds(int n, int root, const int *par, int *round);

/* Per-root constructors on directed weights w (n*n, penalised).  par gets
 * parent pointers.  Return 0 on success, -1 when no tree within the depth
 * bound was found. */
int tree_build_kl(int n, const double *w, int root, int *par, long *budget, int max_swaps);
int tree_build_backtrack(int n, const double *w, int root, int depth, int *par, long *budget);
/* Always succeeds on a connected graph: BFS tree, then a local search that
 * lowers the broadcast depth. */
void tree_build_bfs(int n, const double *w, int root, int *par);

/* One tree per root, MXNet's way: construction of mode on the weights, the
 * link-usage penalty applied after each tree (directed: only the reduce
 * direction child -> parent).  quick: a cheaper search (KL: at most 4
 * swaps per pass; backtracking: a smaller budget), for seeds.  s initialised
 * by the caller.  Returns the max depth, -1 when out of memory. */
int tree_construct(const tree_topo *t, tree_mode mode, double penalty, bool directed,
                   bool quick, tree_set *s);

/* Rules of one tree (parent pointers par, rounds rnd, rooted at root) on t;
 * label names it in err ("tree 3").  0 or KVS_EINVAL. */
int tree_check_one(const tree_topo *t, int root, const int *par, const int *rnd,
                   const char *label, char *err, size_t errlen);

/* Joint local search (opt.c): improve s in place on topology t; rcap = max
 * rounds a tree may use; work = move evaluations allowed. */
void tree_optimize(const tree_topo *t, tree_set *s, int rcap, uint64_t work, uint64_t seed);

#endif
