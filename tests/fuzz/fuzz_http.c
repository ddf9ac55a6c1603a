/* fuzz_http.c - fuzz target for the metrics responder's request parser
 * (net/http.c: http_parse_head).  Built two ways: with clang's libFuzzer
 * (make fuzz-http) and with run-http.c as a plain replay driver that make
 * test runs.
 *
 * Properties checked on every input:
 *  - the result is 0, a complete head length within the input and the head
 *    limit, or minus one of the statuses the responder answers;
 *  - a complete head gives an upper-case method and a path that starts with
 *    a printable character and has no space;
 *  - every shorter prefix of a complete head is "incomplete" (0): the
 *    responder never answers before the whole head arrived, and never
 *    differently because of how the bytes were split into reads;
 *  - the same input gives the same answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_http: property violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char method[20], path[256], m2[20], p2[256];
    const char *buf = (const char *)data;
    int rc = http_parse_head(buf, size, method, sizeof method, path, sizeof path);
    must(rc == 0 || rc == -400 || rc == -414 || rc == -431 || rc == -505 ||
             (rc > 0 && (size_t)rc <= size && rc <= HTTP_MAX_HEAD),
         "result in range");
    int again = http_parse_head(buf, size, m2, sizeof m2, p2, sizeof p2);
    must(again == rc, "deterministic");
    if (rc > 0) {
        must(method[0] != '\0' && path[0] != '\0', "method and path set");
        for (const char *p = method; *p; p++)
            must(*p >= 'A' && *p <= 'Z', "method is upper case");
        for (const char *p = path; *p; p++)
            must(*p > ' ' && *p < 0x7f, "path is printable without spaces");
        must(!strcmp(method, m2) && !strcmp(path, p2), "same method and path");
        /* prefixes: incomplete, never an answer */
        size_t cuts[] = {0, 1, (size_t)rc / 2, (size_t)rc - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            if (cuts[i] >= (size_t)rc)
                continue;
            int pr = http_parse_head(buf, cuts[i], m2, sizeof m2, p2, sizeof p2);
            must(pr == 0, "a prefix of a complete head is incomplete");
        }
    }
    return 0;
}
