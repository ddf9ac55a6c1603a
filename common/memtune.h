/* memtune.h - keep large message buffers in the heap between rounds.
 *
 * ZeroMQ allocates a fresh buffer for every large message it receives.  With
 * glibc's defaults those come from mmap (or from heap pages trimmed back to
 * the OS after the last round), so every round touches fresh pages: a page
 * fault per 4 KiB, which halves the throughput of 64 MiB rounds (measured in
 * bench/RESULTS.md).  mem_tune() raises the mmap threshold to 32 MiB (above
 * KVS_CHUNK_BYTES) and stops trimming, so freed message buffers are reused.
 * Process-wide; call before starting threads.  The daemons always call it.
 * libkvs leaves the host process's malloc alone unless it asks:
 * KVS_MALLOC_TUNE=1 makes kvs_create (dist stores) call it; kvs-bench sets
 * that for itself (unless given), so it measures what the daemons do. */
#ifndef KVS_COMMON_MEMTUNE_H
#define KVS_COMMON_MEMTUNE_H

void mem_tune(void);

/* This process's peak resident memory (VmHWM) in KiB, 0 if unknown: the
 * daemons say it when they exit. */
unsigned long long mem_peak_kib(void);

#endif
