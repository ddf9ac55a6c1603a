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
int tree_build_kl(int n, const double *w, int root, int *par, long *budget);
int tree_build_backtrack(int n, const double *w, int root, int depth, int *par, long *budget);
/* Always succeeds on a connected graph: BFS tree, then a local search that
 * lowers the broadcast depth. */
void tree_build_bfs(int n, const double *w, int root, int *par);

/* Joint local search (opt.c): improve s in place on topology t; rcap = max
 * rounds a tree may use; work = move evaluations allowed. */
void tree_optimize(const tree_topo *t, tree_set *s, int rcap, uint64_t work, uint64_t seed);

#endif
