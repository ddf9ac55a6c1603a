/* memtune.c - see memtune.h. */
#include <malloc.h>

#include "common/memtune.h"

void mem_tune(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
}
