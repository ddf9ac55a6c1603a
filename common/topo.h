/* topo.h - a node's GPU topology: the N x N matrix of directed link
 * weights (w[i*n+j] = speed of the link i -> j; 0 = no link; higher =
 * faster).  The type only, shared by the tree planner (tree/, which builds,
 * detects, parses and plans on it: tree.h) and the device layer (device/,
 * whose simulated backend links devices by it), so that neither includes the
 * other.  A plain value: any thread, on objects the caller owns.
 */
#ifndef KVS_COMMON_TOPO_H
#define KVS_COMMON_TOPO_H

#include <stdbool.h>
#include <stddef.h>

#define TREE_MAX_N 64       /* GPUs per node the planner accepts */
#define TREE_NAME_MAX 128   /* topology name, including the NUL */

typedef struct tree_topo {
    int n;                      /* GPUs, 1..TREE_MAX_N */
    double *w;                  /* n*n, row-major, owned; diagonal ignored */
    char name[TREE_NAME_MAX];   /* "" when unnamed */
} tree_topo;

static inline double tree_w(const tree_topo *t, int i, int j)
{
    return i == j ? 0.0 : t->w[(size_t)i * (size_t)t->n + (size_t)j];
}

/* A usable link joins i and j when both directions have weight > 0. */
static inline bool tree_link(const tree_topo *t, int i, int j)
{
    return i != j && tree_w(t, i, j) > 0 && tree_w(t, j, i) > 0;
}

#endif
