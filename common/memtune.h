/* memtune.h - keep large message buffers in the heap between rounds.
 *
 * ZeroMQ allocates a fresh buffer for every large message it receives.  With
 * glibc's defaults those come from mmap (or from heap pages trimmed back to
 * the OS after the last round), so every round touches fresh pages: a page
 * fault per 4 KiB, which halves the throughput of 64 MiB rounds (measured in
 * bench/RESULTS.md).  mem_tune() raises the mmap threshold to 32 MiB (above
 * KVS_CHUNK_BYTES) and stops trimming, so freed message buffers are reused.
 * Process-wide; call before starting threads.  The daemons always call it;
 * libkvs calls it in kvs_create unless KVS_MALLOC_TUNE=0. */
#ifndef KVS_COMMON_MEMTUNE_H
#define KVS_COMMON_MEMTUNE_H

void mem_tune(void);

#endif
