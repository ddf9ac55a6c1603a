/* keyfile.c - see keyfile.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kvs.h"
#include "common/keyfile.h"

#define FILE_MAX (1u << 20) /* a key file or an authorized list */

static const char z85_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                ".-:+=^!/*?&<>()[]{}@%$#";

int keyfile_z85_decode(const char *z, uint8_t out[32])
{
    for (int i = 0; i < 8; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 5; j++) {
            const char *p = z[5 * i + j] ? strchr(z85_chars, z[5 * i + j]) : NULL;
            if (p == NULL)
                return -1;
            v = v * 85 + (uint64_t)(p - z85_chars);
        }
        if (v > 0xffffffffull)
            return -1;
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(v >> (24 - 8 * j));
    }
    return 0;
}

/* Read path whole (NUL-terminated, malloc'd) after the checks: a regular
 * file; private: no group/other bits; else: not writable by group/others. */
static char *slurp(const char *var, const char *path, bool private, char *err, size_t errlen)
{
    struct stat st;
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s='%s': cannot open: %s", var, path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s='%s': expected a regular file", var, path);
        goto out;
    }
    if (private && (st.st_mode & (S_IRWXG | S_IRWXO))) {
        snprintf(err, errlen, "%s='%s': mode %04o lets group or others read this secret key; "
                 "expected a file only its owner can read (chmod 600)", var, path,
                 (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if (!private && (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(err, errlen, "%s='%s': mode %04o lets group or others write it (and so "
                 "let anyone in); expected chmod 644 or stricter", var, path,
                 (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if (st.st_size > FILE_MAX) {
        snprintf(err, errlen, "%s='%s': %lld bytes, at most %u expected", var, path,
                 (long long)st.st_size, FILE_MAX);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "%s='%s': out of memory", var, path);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            snprintf(err, errlen, "%s='%s': cannot read: %s", var, path,
                     n < 0 ? strerror(errno) : "file shrank");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    if (strlen(buf) != got) {
        snprintf(err, errlen, "%s='%s': a NUL byte in the file", var, path);
        free(buf);
        buf = NULL;
    }
out:
    close(fd);
    return buf;
}

/* "name = "<40 Z85>"" in line: 1 with out set, 0 when line is not about
 * name, -1 when it is and the value is bad. */
static int key_line(const char *line, const char *name, uint8_t out[32])
{
    size_t n = strlen(name);
    while (*line == ' ' || *line == '\t')
        line++;
    if (strncmp(line, name, n) != 0)
        return 0;
    line += n;
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line++ != '=')
        return -1;
    while (*line == ' ' || *line == '\t')
        line++;
    bool quoted = *line == '"';
    if (quoted)
        line++;
    char z[41];
    if (strlen(line) < 40)
        return -1;
    memcpy(z, line, 40);
    z[40] = '\0';
    line += 40;
    if (quoted && *line++ != '"')
        return -1;
    while (*line == ' ' || *line == '\t' || *line == '\r')
        line++;
    if (*line != '\0' && *line != '#')
        return -1;
    return keyfile_z85_decode(z, out) == 0 ? 1 : -1;
}

int keyfile_read_key(const char *var, const char *path, bool need_sk, uint8_t pk[32],
                     uint8_t sk[32], bool *has_sk, char *err, size_t errlen)
{
    /* read it as private first only if it holds a secret: look before judging */
    char *buf = slurp(var, path, false, err, errlen);
    bool got_pk = false, got_sk = false;
    int lineno = 0, rc = KVS_ECONFIG;
    if (buf == NULL)
        return KVS_ECONFIG;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        int a = key_line(line, "public-key", pk), b = key_line(line, "secret-key", sk);
        if (a < 0 || b < 0) {
            snprintf(err, errlen, "%s='%s': line %d: expected %s = \"<40 Z85 characters>\"",
                     var, path, lineno, a < 0 ? "public-key" : "secret-key");
            goto out;
        }
        got_pk |= a > 0;
        got_sk |= b > 0;
    }
    if (!got_pk) {
        snprintf(err, errlen, "%s='%s': no public-key line (a key file from kvs-keygen or "
                 "zcert)", var, path);
        goto out;
    }
    if (need_sk && !got_sk) {
        snprintf(err, errlen, "%s='%s': no secret-key line: this node needs the secret key "
                 "file (kvs-keygen writes NAME.key_secret)", var, path);
        goto out;
    }
    if (got_sk) {
        uint8_t check[32];
        if (sodium_init() < 0 || crypto_scalarmult_base(check, sk) != 0 ||
            sodium_memcmp(check, pk, 32) != 0) {
            snprintf(err, errlen, "%s='%s': the secret key does not belong to the public key",
                     var, path);
            goto out;
        }
        char *again = slurp(var, path, true, err, errlen); /* the mode check */
        if (again == NULL)
            goto out;
        free(again);
    }
    *has_sk = got_sk;
    rc = 0;
out:
    if (buf) {
        memset(buf, 0, strlen(buf));
        free(buf);
    }
    if (rc != 0)
        memset(sk, 0, 32);
    return rc;
}

int keyfile_read_authorized(const char *var, const char *path, keyfile_keys *k, char *err,
                            size_t errlen)
{
    char *buf = slurp(var, path, false, err, errlen);
    int lineno = 0, rc = KVS_ECONFIG;
    if (buf == NULL)
        return KVS_ECONFIG;
    k->nauth = 0;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char role[16], z[64];
        lineno++;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '\0' || *line == '#' || *line == '\r')
            continue;
        if (sscanf(line, "%15s %63s", role, z) != 2 ||
            (strcmp(role, "worker") != 0 && strcmp(role, "server") != 0) || strlen(z) != 40) {
            snprintf(err, errlen, "%s='%s': line %d: expected '<worker|server> <40 Z85 "
                     "characters of a public key>'", var, path, lineno);
            goto out;
        }
        if (k->nauth >= KEYFILE_AUTH_MAX) {
            snprintf(err, errlen, "%s='%s': more than %d keys", var, path, KEYFILE_AUTH_MAX);
            goto out;
        }
        if (keyfile_z85_decode(z, k->auth_pk[k->nauth]) != 0) {
            snprintf(err, errlen, "%s='%s': line %d: '%s' is not Z85", var, path, lineno, z);
            goto out;
        }
        k->auth_worker[k->nauth++] = strcmp(role, "worker") == 0;
    }
    if (k->nauth == 0) {
        snprintf(err, errlen, "%s='%s': no key in it: nobody could join", var, path);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static const char *set_or_null(const char *path)
{
    return path && path[0] ? path : NULL;
}

int keyfile_load(const keyfile_paths *paths, bool listens, bool connects, const char *who,
                 keyfile_keys *k, char *err, size_t errlen)
{
    const char *server = set_or_null(paths->server),
               *client = set_or_null(paths->client),
               *authorized = set_or_null(paths->authorized);
    memset(k, 0, sizeof *k);
    if (server == NULL) {
        if (client || authorized) {
            snprintf(err, errlen, "%s is set without KVS_CURVE_SERVER_KEY: CURVE key files "
                     "need the server key too (see README, Security)",
                     client ? "KVS_CURVE_CLIENT_KEY" : "KVS_CURVE_AUTHORIZED");
            return KVS_ECONFIG;
        }
        return 0;
    }
    if (keyfile_read_key("KVS_CURVE_SERVER_KEY", server, listens, k->server_pk,
                         k->server_sk, &k->server_sk_set, err, errlen) != 0)
        return KVS_ECONFIG;
    if (client) {
        bool has;
        if (keyfile_read_key("KVS_CURVE_CLIENT_KEY", client, true, k->client_pk,
                             k->client_sk, &has, err, errlen) != 0)
            return KVS_ECONFIG;
        k->client_set = true;
    } else if (connects) {
        snprintf(err, errlen, "KVS_CURVE_CLIENT_KEY is not set: with KVS_CURVE_SERVER_KEY a "
                 "%s needs its own key pair (kvs-keygen)", who);
        return KVS_ECONFIG;
    }
    if (authorized) {
        if (keyfile_read_authorized("KVS_CURVE_AUTHORIZED", authorized, k, err, errlen) != 0)
            return KVS_ECONFIG;
    } else if (listens) {
        snprintf(err, errlen, "KVS_CURVE_AUTHORIZED is not set: with KVS_CURVE_SERVER_KEY the "
                 "%s needs the list of client keys it lets in", who);
        return KVS_ECONFIG;
    }
    k->files = true;
    return 0;
}
