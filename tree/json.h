/* json.h - tree/'s small JSON reader, also used by kvs-topo.
 * Pure functions; no global state; any thread. */
#ifndef KVS_TREE_JSON_H
#define KVS_TREE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

/* A strict RFC 8259 reader: no comments, no trailing commas, no NaN, depth
 * <= TJ_MAX_DEPTH, every index checked against the input length. */

#define TJ_MAX_DEPTH 64
#define TJ_MAX_INPUT (256u << 20)

typedef enum tj_type { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ } tj_type;

typedef struct tj_val {
    tj_type type;
    double num;             /* TJ_NUM */
    char *str;              /* TJ_STR: NUL-terminated UTF-8 (may hold \0 escapes) */
    size_t len;             /* TJ_STR: bytes; TJ_ARR/TJ_OBJ: items */
    struct tj_val *items;   /* TJ_ARR / TJ_OBJ values */
    char **keys;            /* TJ_OBJ keys, len of them */
} tj_val;

/* Parse text[0..len).  *out owned by the caller (tj_free).  KVS_EINVAL with
 * "WHAT:LINE:COL: message" in err, or KVS_ENOMEM. */
int tj_parse(const char *text, size_t len, const char *what, tj_val **out, char *err,
             size_t errlen);
void tj_free(tj_val *v);
/* Member of an object, NULL when absent or v is not an object. */
const tj_val *tj_get(const tj_val *v, const char *key);
/* Read a whole file (<= TJ_MAX_INPUT).  *text owned by the caller (free). */
int tj_read_file(const char *path, char **text, size_t *len, char *err, size_t errlen);
/* Print s as a JSON string literal (with quotes) to f. */
void tj_print_str(void *file, const char *s);

#endif
