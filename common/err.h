/* err.h - error helpers shared by every component.
 * kvs_strerror()/kvs_errname() are public (kvs.h); this header adds the
 * per-thread detail message behind kvs_last_error(). */
#ifndef KVS_COMMON_ERR_H
#define KVS_COMMON_ERR_H

#include <stddef.h>

#include "kvs.h"

/* Record a detail message for the calling thread and return err (so callers
 * can write `return err_set(KVS_EINVAL, "keys is NULL")`).  Thread-safe. */
int err_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write a reason into why (whylen bytes, always terminated when whylen > 0)
 * and return err: the validators' `return err_why(why, len, KVS_EPROTO, ...)`. */
int err_why(char *why, size_t whylen, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Clear the calling thread's detail message. */
void err_clear(void);

#endif
