/* live.c - see live.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "net/live.h"

struct net_mon {
    void *watched;
    net_sock *pair;
    net_mon_fn fn;
    void *arg;
};

static void on_event(net_sock *s, net_msg *m, void *arg)
{
    net_mon *mon = arg;
    char addr[256];
    (void)s;
    /* frame 1: u16 event, u32 value (native byte order); frame 2: endpoint */
    if (m->nframes < 2 || zmq_msg_size(&m->frames[0]) < 6)
        return;
    const uint8_t *d = zmq_msg_data(&m->frames[0]);
    uint16_t ev;
    uint32_t val;
    memcpy(&ev, d, sizeof ev);
    memcpy(&val, d + 2, sizeof val);
    size_t n = zmq_msg_size(&m->frames[1]);
    if (n >= sizeof addr)
        n = sizeof addr - 1;
    memcpy(addr, zmq_msg_data(&m->frames[1]), n);
    addr[n] = '\0';
    mon->fn(mon->arg, ev, (int)val, addr);
}

int net_mon_new(uv_loop_t *loop, void *zctx, void *zsock, int events, net_mon_fn fn, void *arg,
                net_mon **out)
{
    static atomic_ulong seq;
    char ep[96];
    net_mon *m = calloc(1, sizeof *m);
    if (m == NULL)
        return KVS_ENOMEM;
    snprintf(ep, sizeof ep, "inproc://kvs-mon-%p-%lu", zsock, atomic_fetch_add(&seq, 1));
    m->watched = zsock;
    m->fn = fn;
    m->arg = arg;
    if (zmq_socket_monitor(zsock, ep, events) != 0)
        goto fail;
    if (net_sock_new(loop, zctx, ZMQ_PAIR, 10000, on_event, m, &m->pair) != 0) {
        zmq_socket_monitor(zsock, NULL, 0);
        goto fail;
    }
    if (zmq_connect(net_sock_zmq(m->pair), ep) != 0 || net_sock_start(m->pair) != 0) {
        zmq_socket_monitor(zsock, NULL, 0);
        net_sock_free(m->pair);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    free(m);
    return KVS_ENET;
}

void net_mon_free(net_mon *m)
{
    if (m == NULL)
        return;
    zmq_socket_monitor(m->watched, NULL, 0);
    net_sock_free(m->pair);
    free(m);
}

void net_live_heartbeats(void *zsock, const cfg *c)
{
    int ivl = (int)(c->hb_interval_s * 1000), timeout = (int)(c->hb_timeout_s * 1000);
    if (ivl < 1)
        ivl = 1;
    if (timeout < ivl)
        timeout = ivl;
    /* TTL: the peer closes after this without traffic from us (rounded to
     * 100 ms by ZeroMQ; at most 6553.5 s). */
    int ttl = timeout > 6553500 ? 6553500 : timeout;
    zmq_setsockopt(zsock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(zsock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    zmq_setsockopt(zsock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof ttl);
}

void net_live_low_delay(void *zsock)
{
    int tos = 0x10; /* IPTOS_LOWDELAY: Linux maps it to TC_PRIO_INTERACTIVE */
    zmq_setsockopt(zsock, ZMQ_TOS, &tos, sizeof tos);
}

int net_msg_fd(net_msg *m)
{
    for (int i = m->nframes - 1; i >= 0; i--) {
        int fd = zmq_msg_get(&m->frames[i], ZMQ_SRCFD);
        if (fd >= 0)
            return fd;
    }
    return -1;
}
