/* ckpt.c - checkpoint files; see ckpt.h for the format. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/sizes.h"
#include "server/ckpt.h"

#define HDR_LEN 64
#define ENT_LEN 80
#define MULT_LEN 24
#define TRAILER_LEN 16
static const char MAGIC[8] = {'K', 'V', 'S', 'C', 'K', 'P', 'T', '1'};
static const char END_MAGIC[8] = {'K', 'V', 'S', 'C', 'K', 'E', 'N', 'D'};

static int mkdirs(const char *dir);

/* ---- CRC-32C: slicing-by-8 tables, or the SSE4.2 instruction ---- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t c, const uint8_t *p,
                                                             size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t srv_crc32c(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t c = ~crc;
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_hw)
        return ~crc_hw_run(c, p, len);
#endif
    while (len >= 8) {
        uint32_t lo = c ^ le_get32(p), hi = le_get32(p + 4);
        c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
            crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
            crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
    return ~c;
}


void srv_ckpt_path(const char *dir, uint32_t rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s/server-%u.kvsckpt", dir, rank);
}

void srv_ckpt_gen_dir(const char *dir, uint64_t gen, char *buf, size_t len)
{
    snprintf(buf, len, "%s/gen-%012llu", dir, (unsigned long long)gen);
}

/* fsync a directory (its entries are then durable). */
static int fsync_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

/* The directory that holds path's last component ("." for none). */
static void parent_of(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash == NULL)
        snprintf(buf, len, ".");
    else if (slash == buf)
        buf[1] = '\0';
    else
        *slash = '\0';
}

/* A directory the server writes checkpoint files in must be one nobody
 * else can plant links in: a real directory (not a symbolic link, when
 * nofollow), owned by this process's user, writable by nobody else.  Files
 * are then created with O_EXCL | O_NOFOLLOW after removing a stale one, so
 * even a link left there earlier is never followed. */
static int dir_check(const char *dir, bool nofollow, char *why, size_t whylen)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR)
            return err_why(why, whylen, KVS_EINVAL, "checkpoint directory %s is not a directory "
                           "(a symbolic link there is refused: another user may have planted "
                           "it)", dir);
        return err_why(why, whylen, KVS_EINVAL, "cannot open checkpoint directory %s: %s", dir,
                       strerror(errno));
    }
    int rc = fstat(fd, &st);
    int e = errno;
    close(fd);
    if (rc != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot stat checkpoint directory %s: %s", dir,
                       strerror(e));
    if (st.st_uid != geteuid())
        return err_why(why, whylen, KVS_EINVAL, "checkpoint directory %s is owned by uid %u, "
                       "not by this server's user (uid %u): its owner could plant links that "
                       "make the server overwrite other files; use a directory of your own",
                       dir, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return err_why(why, whylen, KVS_EINVAL, "checkpoint directory %s is writable by other "
                       "users (mode %03o): they could plant links that make the server overwrite "
                       "other files; chmod go-w it", dir, (unsigned)(st.st_mode & 0777));
    return 0;
}

/* Create path (its directory passed dir_check) for writing: a stale file or
 * link of that name is removed first, and the new one is made with O_EXCL
 * and O_NOFOLLOW (never through a link).  fd, or -1 with errno. */
static int create_excl(const char *path, mode_t mode)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return -1;
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

/* Open path for reading: a regular file only (a FIFO, device or socket
 * would block or never end; a link is not followed).  fd, or -1 with why. */
static int open_regular(const char *path, const char *what, char *why, size_t whylen, int *rc)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *rc = err_why(why, whylen, KVS_EPROTO, "cannot open %s %s: %s", what, path,
                      errno == ELOOP ? "a symbolic link (refused)" : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *rc = err_why(why, whylen, KVS_EPROTO, "%s %s is not a regular file (refused)", what,
                      path);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* "gen-<digits>" (nothing after): its G, else 0. */
static uint64_t gen_of_name(const char *name)
{
    if (strncmp(name, "gen-", 4) != 0 || name[4] < '0' || name[4] > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long g = strtoull(name + 4, &end, 10);
    return errno || *end ? 0 : (uint64_t)g;
}

static void man_path(const char *dir, uint32_t rank, bool tmp, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%sserver-%u.manifest%s", dir, tmp ? "." : "", rank,
             tmp ? ".tmp" : "");
}

#define MAN_TEXT_MAX 1024

int srv_ckpt_man_read(const char *dir, uint32_t rank, srv_ckpt_man *m, char *why,
                      size_t whylen)
{
    char path[4200], text[MAN_TEXT_MAX + 1];
    memset(m, 0, sizeof *m);
    man_path(dir, rank, false, path, sizeof path);
    struct stat lst;
    if (lstat(path, &lst) != 0 && errno == ENOENT)
        return 0;
    int rc = 0;
    int fd = open_regular(path, "manifest", why, whylen, &rc);
    if (fd < 0)
        return rc;
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, text + len, MAN_TEXT_MAX + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len > MAN_TEXT_MAX)
            break;
    }
    close(fd);
    if (len > MAN_TEXT_MAX)
        return err_why(why, whylen, KVS_EPROTO, "%s: corrupted: more than %d bytes", path,
                       MAN_TEXT_MAX);
    text[len] = '\0';
    /* the lines, each checked; the crc covers every byte before "crc " */
    unsigned rk = 0;
    int used = 0;
    const char *crcline = strstr(text, "crc ");
    if (strlen(text) != len || strncmp(text, "kvsd-manifest 1\nserver ", 23) != 0 ||
        sscanf(text + 23, "%u\n%n", &rk, &used) != 1 || used == 0 || rk != rank ||
        crcline == NULL)
        goto bad;
    const char *p = text + 23 + used;
    while (p < crcline) {
        unsigned long long g, id;
        int k = 0;
        if (m->n == CKPT_MAN_MAX || sscanf(p, "gen %llu %16llx\n%n", &g, &id, &k) != 2 ||
            k == 0 || p[k - 1] != '\n' || g == 0 || (m->n > 0 && g >= m->gen[m->n - 1]))
            goto bad;
        m->gen[m->n] = g;
        m->id[m->n++] = id;
        p += k;
    }
    unsigned crc;
    int k = 0;
    if (p != crcline || m->n == 0 || sscanf(p, "crc %8x\n%n", &crc, &k) != 1 || k == 0 ||
        p[k - 1] != '\n' || p + k != text + len)
        goto bad;
    if (crc != srv_crc32c(0, text, (size_t)(crcline - text))) {
        memset(m, 0, sizeof *m);
        return err_why(why, whylen, KVS_EPROTO, "%s: corrupted: checksum mismatch", path);
    }
    m->exists = true;
    return 0;
bad:
    memset(m, 0, sizeof *m);
    return err_why(why, whylen, KVS_EPROTO, "%s is not a valid kvsd manifest of server %u",
                   path, rank);
}

int srv_ckpt_man_write(const char *dir, uint32_t rank, const srv_ckpt_man *m, char *why,
                       size_t whylen)
{
    char path[4200], tmp[4200], text[MAN_TEXT_MAX];
    int len, fd = -1;
    if (m->n < 0 || m->n > CKPT_MAN_MAX)
        return err_why(why, whylen, KVS_EINTERNAL, "manifest of %d generations", m->n);
    man_path(dir, rank, false, path, sizeof path);
    man_path(dir, rank, true, tmp, sizeof tmp);
    if (m->n == 0) { /* nothing committed: no manifest */
        if ((unlink(path) != 0 && errno != ENOENT) || fsync_dir(dir) != 0)
            return err_why(why, whylen, KVS_EINVAL, "cannot remove %s: %s", path,
                           strerror(errno));
        return 0;
    }
    len = snprintf(text, sizeof text, "kvsd-manifest 1\nserver %u\n", rank);
    for (int i = 0; i < m->n; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "gen %llu %016llx\n",
                        (unsigned long long)m->gen[i], (unsigned long long)m->id[i]);
    len += snprintf(text + len, sizeof text - (size_t)len, "crc %08x\n",
                    srv_crc32c(0, text, (size_t)len));
    if (mkdirs(dir) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot create checkpoint directory %s: %s", dir,
                       strerror(errno));
    int rc = dir_check(dir, false, why, whylen);
    if (rc != 0)
        return rc;
    fd = create_excl(tmp, 0644);
    if (fd < 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot create %s: %s", tmp, strerror(errno));
    if (write(fd, text, (size_t)len) != len || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return err_why(why, whylen, KVS_EINVAL, "cannot write %s: %s", tmp, strerror(e));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return err_why(why, whylen, KVS_EINVAL, "cannot put %s in place: %s", path, strerror(e));
    }
    if (fsync_dir(dir) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot sync directory %s: %s", dir,
                       strerror(errno));
    return 0;
}

uint64_t srv_ckpt_gen_max(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t max = 0;
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t g = gen_of_name(de->d_name);
        if (g > max)
            max = g;
    }
    closedir(d);
    return max;
}

void srv_ckpt_prune(const char *dir, uint32_t rank, const uint64_t *keep, int nkeep,
                    uint64_t below)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        uint64_t g = gen_of_name(de->d_name);
        bool kept = g == 0 || g >= below;
        for (int i = 0; i < nkeep && !kept; i++)
            kept = keep[i] == g;
        struct stat st;
        if (kept || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode))
            continue; /* a link or a file named like a generation: not ours to touch */
        char sub[4300], path[4400];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        srv_ckpt_path(sub, rank, path, sizeof path);
        unlink(path);
        snprintf(path, sizeof path, "%s/.server-%u.kvsckpt.tmp", sub, rank);
        unlink(path);
        rmdir(sub); /* fails while other servers' files are in it: fine */
    }
    closedir(d);
    fsync_dir(dir);
}

/* ---- writing ---- */

typedef struct wfile {
    int fd;
    uint32_t crc;
    uint64_t written;
} wfile;

static int wput(wfile *w, const void *data, uint64_t len)
{
    const uint8_t *p = data;
    w->crc = srv_crc32c(w->crc, data, (size_t)len);
    while (len > 0) {
        size_t n = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (uint64_t)r;
        w->written += (uint64_t)r;
    }
    return 0;
}

static int mkdirs(const char *dir)
{
    char buf[4096];
    if (strlen(dir) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static uint64_t entry_len(const srv_entry_view *v)
{
    uint64_t len = ENT_LEN + v->bytes;
    if (v->upd)
        len += (uint64_t)v->upd->nstate * srv_upd_state_bytes(v->upd);
    return len;
}

static void tmp_path(const char *dir, uint32_t rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s/.server-%u.kvsckpt.tmp", dir, rank);
}

int srv_ckpt_commit(const char *dir, uint32_t rank, char *why, size_t whylen)
{
    char path[4200], tmp[4300];
    srv_ckpt_path(dir, rank, path, sizeof path);
    tmp_path(dir, rank, tmp, sizeof tmp);
    if (rename(tmp, path) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot rename %s to %s: %s", tmp, path,
                    strerror(errno));
    if (fsync_dir(dir) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot sync directory %s: %s", dir,
                       strerror(errno));
    return 0;
}

int srv_ckpt_write(const char *dir, const srv_ckpt_meta *meta, const srv_entry_view *v,
                   size_t n, const srv_optim *o, bool commit, char *why, size_t whylen)
{
    char path[4200], tmp[4300];
    uint8_t h[HDR_LEN] = {0};
    wfile w = {-1, 0, 0};
    int rc = 0;
    uint32_t spec_len = o && o->set ? (uint32_t)strlen(o->text) : 0;
    size_t nmults = 0;
    if (o)
        for (size_t i = 0; i < o->mults.cap; i++)
            nmults += o->mults.used[i] == 1;
    srv_ckpt_path(dir, meta->rank, path, sizeof path);
    tmp_path(dir, meta->rank, tmp, sizeof tmp);
    char parent[4200];
    parent_of(dir, parent, sizeof parent);
    /* dir is a generation's directory in the job's checkpoint directory:
     * that one is checked before anything is made in it */
    if (mkdirs(parent) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot create checkpoint directory %s: %s",
                       parent, strerror(errno));
    if ((rc = dir_check(parent, false, why, whylen)) != 0)
        return rc;
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || fsync_dir(parent) != 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot create checkpoint directory %s: %s", dir,
                    strerror(errno));
    if ((rc = dir_check(dir, true, why, whylen)) != 0)
        return rc;
    uint64_t total = HDR_LEN + spec_len + nmults * MULT_LEN + TRAILER_LEN;
    for (size_t i = 0; i < n; i++)
        total += entry_len(&v[i]);

    w.fd = create_excl(tmp, 0644);
    if (w.fd < 0)
        return err_why(why, whylen, KVS_EINVAL, "cannot create %s: %s", tmp, strerror(errno));
    memcpy(h, MAGIC, 8);
    le_put32(h + 8, CKPT_VERSION);
    le_put32(h + 12, meta->rank);
    le_put32(h + 16, meta->num_servers);
    le_put32(h + 20, meta->num_workers);
    le_put64(h + 24, meta->save_id);
    le_put64(h + 32, n);
    le_put64(h + 40, total);
    le_put32(h + 48, (o && o->set ? 1u : 0u) | (o && o->active ? 2u : 0u));
    le_put32(h + 52, spec_len);
    le_put32(h + 56, (uint32_t)nmults);
    if (wput(&w, h, HDR_LEN) != 0 || wput(&w, o ? o->text : "", spec_len) != 0)
        goto io_err;
    for (size_t i = 0; o && i < o->mults.cap; i++) {
        if (o->mults.used[i] != 1)
            continue;
        const optim_mult *m = o->mults.vals[i];
        uint8_t b[MULT_LEN];
        uint64_t bits;
        le_put64(b, o->mults.keys[i]);
        memcpy(&bits, &m->lr_mult, 8);
        le_put64(b + 8, bits);
        memcpy(&bits, &m->wd_mult, 8);
        le_put64(b + 16, bits);
        if (wput(&w, b, MULT_LEN) != 0)
            goto io_err;
    }
    for (size_t i = 0; i < n; i++) {
        const srv_entry_view *e = &v[i];
        const srv_upd *u = e->upd;
        uint8_t b[ENT_LEN] = {0};
        le_put64(b, e->key);
        le_put32(b + 8, e->part);
        le_put32(b + 12, (uint32_t)e->dtype);
        le_put64(b + 16, e->count);
        le_put64(b + 24, e->offset);
        le_put64(b + 32, e->total);
        le_put64(b + 40, e->round);
        le_put64(b + 48, u ? u->t : 0);
        le_put32(b + 56, (e->async ? 1u : 0u) | (u ? 2u : 0u) | (u && u->master_ok ? 4u : 0u));
        le_put32(b + 60, u ? (uint32_t)u->nstate : 0);
        le_put64(b + 64, e->bytes);
        le_put32(b + 72, (uint32_t)optim_state_dtype(e->dtype));
        if (wput(&w, b, ENT_LEN) != 0 || wput(&w, e->value->data, e->bytes) != 0)
            goto io_err;
        for (int j = 0; u && j < u->nstate; j++)
            if (wput(&w, u->state[j], srv_upd_state_bytes(u)) != 0)
                goto io_err;
    }
    uint8_t t[TRAILER_LEN] = {0};
    memcpy(t, END_MAGIC, 8);
    le_put32(t + 8, w.crc);
    if (wput(&w, t, TRAILER_LEN) != 0)
        goto io_err;
    if (w.written != total) {
        rc = err_why(why, whylen, KVS_EINTERNAL, "%s: wrote %llu bytes, planned %llu", tmp,
                  (unsigned long long)w.written, (unsigned long long)total);
        goto out;
    }
    if (fsync(w.fd) != 0)
        goto io_err;
    if (close(w.fd) != 0) {
        w.fd = -1;
        goto io_err;
    }
    w.fd = -1;
    return commit ? srv_ckpt_commit(dir, meta->rank, why, whylen) : 0;
io_err:
    rc = err_why(why, whylen, KVS_EINVAL, "cannot write %s: %s", tmp, strerror(errno));
out:
    if (w.fd >= 0)
        close(w.fd);
    unlink(tmp);
    return rc;
}

/* ---- reading ---- */

typedef struct rfile {
    FILE *f;
    const char *path;
    uint64_t size, pos;
    uint32_t crc;
    uint64_t values_left; /* bytes of values the job's keys can still take */
} rfile;

static int rget(rfile *r, void *buf, uint64_t len, const char *what, char *why, size_t whylen)
{
    if (len > r->size - r->pos)
        return err_why(why, whylen, KVS_EPROTO, "%s: truncated or corrupted: %s needs %llu bytes "
                    "at offset %llu, the file has %llu", r->path, what,
                    (unsigned long long)len, (unsigned long long)r->pos,
                    (unsigned long long)r->size);
    uint8_t *p = buf;
    uint64_t left = len;
    while (left > 0) {
        size_t n = left > (1u << 30) ? (1u << 30) : (size_t)left;
        size_t got = fread(p, 1, n, r->f);
        if (got == 0)
            return err_why(why, whylen, KVS_EPROTO, "%s: read error at offset %llu: %s", r->path,
                        (unsigned long long)r->pos, ferror(r->f) ? strerror(errno)
                                                                  : "unexpected end");
        r->crc = srv_crc32c(r->crc, p, got);
        p += got;
        left -= got;
        r->pos += got;
    }
    return 0;
}

void srv_ckpt_free(srv_ckpt *c)
{
    for (size_t i = 0; c->parts && i < c->n; i++) {
        srv_buf_unref(c->parts[i].value);
        srv_upd_free(c->parts[i].upd);
    }
    free(c->parts);
    free(c->mult_keys);
    free(c->mults);
    memset(c, 0, sizeof *c);
}

static int read_entry(rfile *r, srv_ckpt_part *p, uint64_t idx, char *why, size_t whylen)
{
    uint8_t b[ENT_LEN];
    char what[64];
    int rc;
    snprintf(what, sizeof what, "entry %llu", (unsigned long long)idx);
    if ((rc = rget(r, b, ENT_LEN, what, why, whylen)) != 0)
        return rc;
    p->key = le_get64(b);
    p->part = le_get32(b + 8);
    uint32_t dtype = le_get32(b + 12);
    p->count = le_get64(b + 16);
    p->offset = le_get64(b + 24);
    p->total = le_get64(b + 32);
    p->round = le_get64(b + 40);
    uint64_t t = le_get64(b + 48);
    uint32_t flags = le_get32(b + 56), nstate = le_get32(b + 60);
    uint64_t vbytes = le_get64(b + 64), bytes, end;
    uint32_t sdtype = le_get32(b + 72);
    if (dtype >= KVS_NUM_DTYPES || !size_mul(p->count, kvs_dtype_size(dtype), &bytes) ||
        bytes != vbytes || !size_add(p->offset, p->count, &end) || end > p->total ||
        nstate > OPTIM_MAX_STATE || (flags & ~7u) != 0 ||
        (nstate > 0 && sdtype != (uint32_t)optim_state_dtype(dtype)) ||
        (nstate > 0 && !(flags & 2u)))
        return err_why(why, whylen, KVS_EPROTO, "%s: corrupted: entry %llu (key %llu) has an "
                    "impossible header", r->path, (unsigned long long)idx,
                    (unsigned long long)p->key);
    p->dtype = (kvs_dtype)dtype;
    p->async = flags & 1u;
    if (vbytes > r->values_left)
        return err_why(why, whylen, KVS_ESHAPE, "%s: entry %llu (key %llu) declares %llu bytes "
                       "of value, more than this job's keys at this server hold (the file does "
                       "not belong to this job)", r->path, (unsigned long long)idx,
                       (unsigned long long)p->key, (unsigned long long)vbytes);
    r->values_left -= vbytes;
    if (vbytes > r->size - r->pos)
        return rget(r, NULL, vbytes, "a value", why, whylen);
    p->value = srv_buf_new_value(vbytes);
    if (p->value == NULL)
        return err_why(why, whylen, KVS_ENOMEM, "%s: out of memory for key %llu (%llu bytes)",
                    r->path, (unsigned long long)p->key, (unsigned long long)vbytes);
    if ((rc = rget(r, p->value->data, vbytes, "a value", why, whylen)) != 0)
        return rc;
    if (!(flags & 2u))
        return 0;
    p->upd = calloc(1, sizeof *p->upd);
    if (p->upd == NULL)
        return err_why(why, whylen, KVS_ENOMEM, "out of memory");
    p->upd->t = t;
    p->upd->dtype = p->dtype;
    p->upd->count = p->count;
    p->upd->master_ok = (flags & 4u) != 0;
    uint64_t sbytes = srv_upd_state_bytes(p->upd);
    for (uint32_t j = 0; j < nstate; j++) {
        if (sbytes > r->size - r->pos)
            return rget(r, NULL, sbytes, "optimizer state", why, whylen);
        p->upd->state[j] = malloc(sbytes ? sbytes : 1);
        if (p->upd->state[j] == NULL)
            return err_why(why, whylen, KVS_ENOMEM, "%s: out of memory for the state of key %llu",
                        r->path, (unsigned long long)p->key);
        p->upd->nstate = (int)j + 1;
        if ((rc = rget(r, p->upd->state[j], sbytes, "optimizer state", why, whylen)) != 0)
            return rc;
    }
    return 0;
}

int srv_ckpt_read(const char *dir, uint32_t rank, uint64_t max_parts, uint64_t max_bytes,
                  srv_ckpt *out, char *why, size_t whylen)
{
    uint8_t h[HDR_LEN], t[TRAILER_LEN];
    rfile r = {.values_left = max_bytes};
    struct stat stt;
    int rc = 0;
    memset(out, 0, sizeof *out);
    srv_ckpt_path(dir, rank, out->path, sizeof out->path);
    r.path = out->path;
    int fd = open_regular(out->path, "checkpoint", why, whylen, &rc);
    if (fd < 0)
        return rc;
    r.f = fdopen(fd, "rb");
    if (r.f == NULL) {
        close(fd);
        return err_why(why, whylen, KVS_ENOMEM, "cannot open checkpoint %s: %s", out->path,
                       strerror(errno));
    }
    if (fstat(fileno(r.f), &stt) != 0) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: %s", out->path, strerror(errno));
        goto out;
    }
    r.size = (uint64_t)stt.st_size;
    if ((rc = rget(&r, h, HDR_LEN, "the header", why, whylen)) != 0)
        goto out;
    if (memcmp(h, MAGIC, 8) != 0) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s is not a kvsd checkpoint (bad magic)", r.path);
        goto out;
    }
    if (le_get32(h + 8) != CKPT_VERSION) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: checkpoint format version %u; this build reads "
                  "version %d", r.path, le_get32(h + 8), CKPT_VERSION);
        goto out;
    }
    if (le_get64(h + 40) != r.size) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: truncated or corrupted: %llu bytes, the header "
                  "says %llu", r.path, (unsigned long long)r.size,
                  (unsigned long long)le_get64(h + 40));
        goto out;
    }
    out->meta.rank = le_get32(h + 12);
    out->meta.num_servers = le_get32(h + 16);
    out->meta.num_workers = le_get32(h + 20);
    out->meta.save_id = le_get64(h + 24);
    uint64_t n = le_get64(h + 32);
    uint32_t flags = le_get32(h + 48), spec_len = le_get32(h + 52), nmults = le_get32(h + 56);
    if (spec_len >= OPTIM_TEXT_MAX || (flags & ~3u) || n > r.size / ENT_LEN ||
        nmults > r.size / MULT_LEN || out->meta.rank != rank) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: corrupted header (rank %u, %llu entries, "
                  "spec of %u bytes)", r.path, out->meta.rank, (unsigned long long)n, spec_len);
        goto out;
    }
    if (n > max_parts) {
        rc = err_why(why, whylen, KVS_ESHAPE, "%s: %llu key parts in the checkpoint, %llu in "
                     "this job at this server", r.path, (unsigned long long)n,
                     (unsigned long long)max_parts);
        goto out;
    }
    out->spec_set = flags & 1u;
    out->active = (flags & 2u) != 0;
    if ((rc = rget(&r, out->spec, spec_len, "the optimizer spec", why, whylen)) != 0)
        goto out;
    out->spec[spec_len] = '\0';
    out->mult_keys = calloc(nmults ? nmults : 1, sizeof *out->mult_keys);
    out->mults = calloc(nmults ? nmults : 1, sizeof *out->mults);
    out->parts = calloc(n ? n : 1, sizeof *out->parts);
    if (out->mult_keys == NULL || out->mults == NULL || out->parts == NULL) {
        rc = err_why(why, whylen, KVS_ENOMEM, "%s: out of memory", r.path);
        goto out;
    }
    for (uint32_t i = 0; i < nmults; i++) {
        uint8_t b[MULT_LEN];
        uint64_t bits;
        if ((rc = rget(&r, b, MULT_LEN, "a key multiplier", why, whylen)) != 0)
            goto out;
        out->mult_keys[i] = le_get64(b);
        bits = le_get64(b + 8);
        memcpy(&out->mults[i].lr_mult, &bits, 8);
        bits = le_get64(b + 16);
        memcpy(&out->mults[i].wd_mult, &bits, 8);
        out->nmults = i + 1;
    }
    out->n = n;
    for (uint64_t i = 0; i < n; i++)
        if ((rc = read_entry(&r, &out->parts[i], i, why, whylen)) != 0)
            goto out;
    uint32_t crc = r.crc;
    if ((rc = rget(&r, t, TRAILER_LEN, "the trailer", why, whylen)) != 0)
        goto out;
    if (memcmp(t, END_MAGIC, 8) != 0 || r.pos != r.size) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: corrupted: no trailer where it belongs", r.path);
        goto out;
    }
    if (le_get32(t + 8) != crc) {
        rc = err_why(why, whylen, KVS_EPROTO, "%s: corrupted: checksum 0x%08x, the file says "
                  "0x%08x", r.path, crc, le_get32(t + 8));
        goto out;
    }
out:
    fclose(r.f);
    if (rc) {
        char keep[4200];
        snprintf(keep, sizeof keep, "%s", out->path);
        srv_ckpt_free(out);
        snprintf(out->path, sizeof out->path, "%s", keep);
    }
    return rc;
}
