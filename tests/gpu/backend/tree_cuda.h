/* tree_cuda.h - the CUDA backend of the tree executor (tests/gpu; in
 * libkvs_cuda.a, built where nvcc is found).  devices[i] = CUDA device of
 * buffer i; bytes = largest array.  Peer copies (cudaMemcpyPeerAsync) where
 * p2p and cudaDeviceCanAccessPeer, else staged through pinned host memory. */
#ifndef KVS_TESTS_GPU_TREE_CUDA_H
#define KVS_TESTS_GPU_TREE_CUDA_H

#include "tree/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

int tree_backend_cuda_new(int n, const int *devices, uint64_t bytes, bool p2p, tree_backend *out,
                          char *err, size_t errlen);
void tree_backend_cuda_free(tree_backend *be);

#ifdef __cplusplus
}
#endif

#endif
