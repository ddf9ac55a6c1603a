/* cma.c - see cma.h. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/sizes.h"
#include "net/auth.h"
#include "server/cma.h"

void srv_cma_init(srv_cma *c)
{
    memset(c, 0, sizeof *c);
    c->pidfd = -1;
}

void srv_cma_reset(srv_cma *c)
{
    if (c->pidfd >= 0)
        close(c->pidfd);
    srv_cma_init(c);
}

static int copy1(const srv_cma *c, int dir, uint8_t *p, uint64_t addr, uint64_t len)
{
    while (len > 0) {
        size_t n = len > (1u << 30) ? (1u << 30) : (size_t)len;
        struct iovec local = {p, n}, remote = {(void *)(uintptr_t)addr, n};
        ssize_t r = dir ? process_vm_writev(c->pid, &local, 1, &remote, 1, 0)
                        : process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
        if (r <= 0) {
            if (r == 0)
                errno = EFAULT;
            return -1;
        }
        p += r;
        addr += (uint64_t)r;
        len -= (uint64_t)r;
    }
    return 0;
}

struct cma_job {
    const srv_cma *c;
    int dir;
    uint8_t *buf;
    uint64_t addr;
    atomic_int err; /* first errno, 0 if none */
};

static void job_run(const void *arg, uint64_t lo, uint64_t hi)
{
    struct cma_job *j = (struct cma_job *)arg;
    if (copy1(j->c, j->dir, j->buf + lo, j->addr + lo, hi - lo) != 0) {
        int zero = 0;
        atomic_compare_exchange_strong(&j->err, &zero, errno ? errno : EIO);
    }
}

int srv_cma_copy(red_pool *pool, const srv_cma *c, int dir, void *buf, uint64_t addr,
                 uint64_t len)
{
    if (!c->ok) {
        errno = EPERM;
        return -1;
    }
    if (len < DP_CMA_PAR_MIN || pool == NULL)
        return copy1(c, dir, buf, addr, len);
    struct cma_job j = {c, dir, buf, addr, 0};
    red_pool_for(pool, len, DP_CMA_PAR_CHUNK, job_run, &j);
    if (atomic_load(&j.err)) {
        errno = atomic_load(&j.err);
        return -1;
    }
    return 0;
}

/* ---- read and add piecewise ---- */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_init(void)
{
    pthread_key_create(&scratch_key, free);
}

/* This thread's buffer of DP_CMA_PAR_CHUNK bytes (freed when it exits). */
static uint8_t *scratch(void)
{
    pthread_once(&scratch_once, scratch_init);
    uint8_t *b = pthread_getspecific(scratch_key);
    if (b == NULL && (b = aligned_alloc(64, DP_CMA_PAR_CHUNK)) != NULL)
        pthread_setspecific(scratch_key, b);
    return b;
}

struct cma_add_job {
    const srv_cma *c;
    kvs_dtype dtype;
    size_t esz;
    uint8_t *acc;
    uint64_t addr;
    atomic_int err;
};

static void add_run(const void *arg, uint64_t lo, uint64_t hi)
{
    struct cma_add_job *j = (struct cma_add_job *)arg;
    uint8_t *buf = scratch();
    uint64_t per = DP_CMA_PAR_CHUNK / j->esz;
    int zero = 0;
    if (buf == NULL) {
        atomic_compare_exchange_strong(&j->err, &zero, ENOMEM);
        return;
    }
    for (uint64_t i = lo; i < hi; i += per) {
        uint64_t n = hi - i < per ? hi - i : per;
        if (copy1(j->c, 0, buf, j->addr + i * j->esz, n * j->esz) != 0) {
            atomic_compare_exchange_strong(&j->err, &zero, errno ? errno : EIO);
            return;
        }
        red_add(NULL, j->dtype, j->acc + i * j->esz, buf, n);
    }
}

int srv_cma_add(red_pool *pool, const srv_cma *c, kvs_dtype dtype, void *acc, uint64_t addr,
                uint64_t count)
{
    size_t esz = kvs_dtype_size(dtype);
    if (!c->ok) {
        errno = EPERM;
        return -1;
    }
    if (esz == 0) {
        errno = EINVAL;
        return -1;
    }
    struct cma_add_job j = {c, dtype, esz, acc, addr, 0};
    uint64_t per = DP_CMA_PAR_CHUNK / esz;
    if (count * esz < DP_CMA_PAR_MIN)
        pool = NULL;
    red_pool_for(pool, count, per, add_run, &j);
    if (atomic_load(&j.err)) {
        errno = atomic_load(&j.err);
        return -1;
    }
    return 0;
}

int srv_cma_desc(proto_hdr *h, const uint8_t *desc, char *why, size_t whylen)
{
    uint64_t src = le_get64(desc), dst = le_get64(desc + 8), bytes;
    if (!size_mul(h->count, kvs_dtype_size((kvs_dtype)h->dtype), &bytes)) {
        snprintf(why, whylen, "%s by reference: count %llu overflows a byte size",
                 proto_type_name(h->type), (unsigned long long)h->count);
        return KVS_EPROTO;
    }
    bool carries = h->type == PROTO_PUSH || h->type == PROTO_PUSHPULL ||
                   (h->type == PROTO_INIT && src);
    if (!carries || bytes == 0)
        src = 0;
    else if (src == 0) {
        snprintf(why, whylen, "data by reference at address 0");
        return KVS_EPROTO;
    }
    if ((src && src > UINT64_MAX - bytes) || (dst && dst > UINT64_MAX - bytes)) {
        snprintf(why, whylen, "%s by reference: %llu bytes at %#llx / %#llx wrap around",
                 proto_type_name(h->type), (unsigned long long)bytes, (unsigned long long)src,
                 (unsigned long long)dst);
        return KVS_EPROTO;
    }
    h->cma_src = src;
    h->cma_dst = dst;
    h->body_len = src ? bytes : 0;
    return 0;
}

/* The process behind the pidfd has not exited (its pid cannot have been
 * given to another process). */
static bool pid_alive(const srv_cma *c)
{
    if (c->pidfd < 0)
        return true; /* no pidfd: the challenge read-back below is the check */
    struct pollfd p = {c->pidfd, POLLIN, 0};
    return poll(&p, 1, 0) == 0; /* readable = exited */
}

bool srv_cma_alive(srv_cma *c)
{
    uint8_t now[PROTO_NONCE_LEN];
    if (!c->ok || !pid_alive(c))
        return false;
    uint64_t t = clock_ns();
    if (c->pidfd >= 0 && c->seen_ns && t - c->seen_ns < SRV_CMA_RECHECK_NS)
        return true;
    if (copy1(c, 0, now, c->nonce_addr, sizeof now) != 0 || memcmp(now, c->nonce, sizeof now))
        return false;
    c->seen_ns = t;
    return true;
}

int srv_cma_hello(srv_cma *c, uint64_t req_id, const uint8_t *body,
                  uint8_t challenge[PROTO_NONCE_LEN], char *why, size_t whylen)
{
    srv_cma_reset(c);
    c->pid = (pid_t)le_get64(body);
    c->nonce_addr = le_get64(body + 8);
    c->req_id = req_id;
    if (c->pid <= 0 || (uint64_t)c->pid != le_get64(body) || c->nonce_addr == 0) {
        snprintf(why, whylen, "HELLO names pid %llu at %#llx",
                 (unsigned long long)le_get64(body), (unsigned long long)c->nonce_addr);
        srv_cma_init(c);
        return KVS_EINVAL;
    }
    if (net_random(c->nonce, sizeof c->nonce) != 0) {
        snprintf(why, whylen, "no random bytes for a challenge");
        srv_cma_init(c);
        return KVS_EINTERNAL;
    }
    memcpy(challenge, c->nonce, PROTO_NONCE_LEN);
    c->challenged = true;
    return 0;
}

/* pid is this process or one of its threads (its thread group). */
static bool own_process(pid_t pid)
{
    char path[64], line[128];
    if (pid == getpid())
        return true;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    bool own = false;
    long tgid;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Tgid: %ld", &tgid) == 1) {
            own = tgid == (long)getpid();
            break;
        }
    if (f)
        fclose(f);
    return own;
}

int srv_cma_proof(srv_cma *c, uint64_t req_id, const uint8_t *body, char *why, size_t whylen)
{
    uint8_t seen[PROTO_NONCE_LEN];
    if (!c->challenged || req_id != c->req_id || (uint64_t)c->pid != le_get64(body) ||
        c->nonce_addr != le_get64(body + 8) || memcmp(body + 16, c->nonce, PROTO_NONCE_LEN)) {
        snprintf(why, whylen, "a PROOF that does not answer this connection's challenge");
        srv_cma_reset(c); /* a proven worker's pidfd is closed, not lost */
        return KVS_EAUTH;
    }
    c->challenged = false;
    if (own_process(c->pid)) { /* its memory holds the challenge: it proves nothing */
        snprintf(why, whylen, "pid %d is this server's own process: refused", (int)c->pid);
        srv_cma_reset(c);
        return KVS_EAUTH;
    }
#ifdef SYS_pidfd_open
    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    if (c->pidfd < 0 && errno != ENOSYS) {
        if (errno == ESRCH)
            snprintf(why, whylen, "pid %d: no such process here (the worker is on another "
                     "host or in another pid namespace)", (int)c->pid);
        else
            snprintf(why, whylen, "pid %d: %s", (int)c->pid, strerror(errno));
        srv_cma_init(c);
        return KVS_ENOTSUP;
    }
#endif
    if (copy1(c, 0, seen, c->nonce_addr, sizeof seen) != 0) {
        snprintf(why, whylen, "cannot read pid %d's memory (another host, another pid "
                 "namespace, or ptrace restrictions): %s", (int)c->pid, strerror(errno));
        srv_cma_reset(c);
        return KVS_ENOTSUP;
    }
    if (memcmp(seen, c->nonce, sizeof seen) != 0 || !pid_alive(c)) {
        snprintf(why, whylen, "pid %d does not hold this connection's challenge: it is "
                 "not the sender's process", (int)c->pid);
        srv_cma_reset(c);
        return KVS_EAUTH;
    }
    c->ok = true;
    return 0;
}
