/* tree_backend_cpu.h - a tree executor backend over host buffers (tests). */
#ifndef KVS_TESTS_TREE_BACKEND_CPU_H
#define KVS_TESTS_TREE_BACKEND_CPU_H

#include "tree/tree.h"

struct red_pool;
/* Host buffers summed with red_add() (pool may be NULL). */
void tree_backend_cpu(struct red_pool *pool, tree_backend *out);

#endif
