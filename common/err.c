/* err.c - kvs_strerror, kvs_errname and the per-thread last-error text. */
#include <stdarg.h>
#include <stdio.h>

#include "err.h"

static _Thread_local char err_text[512];

const char *kvs_strerror(int err)
{
    switch (err) {
#define KVS_ERR_STR_(name, val, msg) \
    case val:                        \
        return msg;
        KVS_ERRNO_MAP(KVS_ERR_STR_)
#undef KVS_ERR_STR_
    }
    return "unknown error";
}

const char *kvs_errname(int err)
{
    switch (err) {
#define KVS_ERR_NAME_(name, val, msg) \
    case val:                         \
        return #name;
        KVS_ERRNO_MAP(KVS_ERR_NAME_)
#undef KVS_ERR_NAME_
    }
    return "KVS_E?";
}

int err_set(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_text, sizeof err_text, fmt, ap);
    va_end(ap);
    return err;
}

void err_clear(void)
{
    err_text[0] = '\0';
}

const char *kvs_last_error(void)
{
    return err_text;
}

size_t kvs_dtype_size(kvs_dtype dtype)
{
    switch (dtype) {
    case KVS_FLOAT32: return 4;
    case KVS_FLOAT64: return 8;
    case KVS_FLOAT16: return 2;
    case KVS_BFLOAT16: return 2;
    case KVS_INT32: return 4;
    case KVS_INT64: return 8;
    }
    return 0;
}

const char *kvs_dtype_name(kvs_dtype dtype)
{
    static const char *const names[KVS_NUM_DTYPES] = {
        "float32", "float64", "float16", "bfloat16", "int32", "int64"};
    if ((unsigned)dtype >= KVS_NUM_DTYPES)
        return NULL;
    return names[dtype];
}

const char *kvs_version(void)
{
    return KVS_VERSION_STRING;
}

int err_why(char *why, size_t whylen, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return err;
}
