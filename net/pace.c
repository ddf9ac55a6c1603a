/* pace.c - see pace.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "net/pace.h"

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47 /* Linux, all architectures but a few old ones */
#endif

struct net_pacer {
    double link_gbps;
    double link_bytes_s;
    int npeers, weight, nremote;
    int *fd;      /* per peer: the connection last seen (-1: none) */
    bool *remote; /* per peer: on another host (counted in nremote) */
    bool warned;  /* a setsockopt failure was logged */
    const char *who; /* the caller's, read at each log line */
    char kind[16];
};

net_pacer *net_pacer_new(double link_gbps, int npeers, int weight, const char *who,
                         const char *peer_kind)
{
    if (!(link_gbps > 0) || npeers <= 0)
        return NULL;
    net_pacer *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->fd = malloc((size_t)npeers * sizeof *p->fd);
        p->remote = calloc((size_t)npeers, sizeof *p->remote);
    }
    if (p == NULL || p->fd == NULL || p->remote == NULL) {
        LOG(LOG_WARN, who, "net", "out of memory: connections are not paced (KVS_LINK_GBPS)");
        net_pacer_free(p);
        return NULL;
    }
    for (int i = 0; i < npeers; i++)
        p->fd[i] = -1;
    p->link_gbps = link_gbps;
    p->link_bytes_s = link_gbps * 1e9 / 8;
    p->npeers = npeers;
    p->weight = weight < 1 ? 1 : weight;
    p->who = who;
    snprintf(p->kind, sizeof p->kind, "%s", peer_kind);
    return p;
}

void net_pacer_free(net_pacer *p)
{
    if (p == NULL)
        return;
    free(p->fd);
    free(p->remote);
    free(p);
}

int net_fd_remote(int fd)
{
    struct sockaddr_in here, there;
    socklen_t hl = sizeof here, tl = sizeof there;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&here, &hl) != 0 ||
        getpeername(fd, (struct sockaddr *)&there, &tl) != 0 || hl != sizeof here ||
        tl != sizeof there || here.sin_family != AF_INET || there.sin_family != AF_INET)
        return 0;
    uint32_t peer = ntohl(there.sin_addr.s_addr);
    return there.sin_addr.s_addr != here.sin_addr.s_addr && (peer >> 24) != 127;
}

double net_pacer_rate(const net_pacer *p, int *remote_peers)
{
    if (remote_peers)
        *remote_peers = p ? p->nremote : 0;
    if (p == NULL || p->nremote == 0)
        return 0;
    return p->link_bytes_s / ((double)p->nremote * p->weight);
}

static void pace(net_pacer *p, int fd, double bytes_s)
{
    uint64_t v = bytes_s < 1 ? 1 : (uint64_t)bytes_s;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof v) == 0)
        return;
    /* kernels before 5.x take a 32-bit rate only */
    uint32_t v32 = v >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)v;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v32, sizeof v32) == 0 || p->warned)
        return;
    p->warned = true;
    LOG(LOG_WARN, p->who, "net", "cannot pace a connection (KVS_LINK_GBPS): %s",
        strerror(errno));
}

int net_pacer_see(net_pacer *p, int idx, int fd)
{
    if (p == NULL || idx < 0 || idx >= p->npeers || fd < 0 || p->fd[idx] == fd)
        return 0;
    p->fd[idx] = fd; /* a new connection (or the first) of this peer */
    if (!net_fd_remote(fd))
        return 0;
    if (p->remote[idx]) {
        pace(p, fd, net_pacer_rate(p, NULL));
        return 1;
    }
    p->remote[idx] = true;
    p->nremote++;
    double share = net_pacer_rate(p, NULL);
    for (int i = 0; i < p->npeers; i++) /* one more flow on the link: every share shrinks */
        if (p->remote[i] && net_fd_remote(p->fd[i]))
            pace(p, p->fd[i], share);
    LOG(LOG_INFO, p->who, "net", "pacing the connections to %d %s%s on %s at %.0f Mbit/s "
        "each (KVS_LINK_GBPS=%g%s)", p->nremote, p->kind, p->nremote == 1 ? "" : "s",
        p->nremote == 1 ? "another host" : "other hosts", share * 8 / 1e6, p->link_gbps, p->weight > 1 ? ", shared by the local group" : "");
    return 1;
}
