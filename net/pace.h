/* pace.h - pacing the data connections to other hosts (KVS_LINK_GBPS).
 *
 * A parameter server's rounds are all-to-all: every worker sends to every
 * server at once and every server answers every worker, so each host's
 * link carries one TCP flow per peer on another host, and as many flows
 * converge on each host's incoming link.  Left to themselves the flows
 * queue at the links, take turns, and end unevenly: with nothing but
 * sockets moving a push's bytes, 3 and 4 hosts reach 0.85-0.92 of a 1
 * Gbit link where one flow per link (a ring) reaches 0.95.  Paced at the
 * link's rate over the flows that share it (SO_MAX_PACING_RATE, which
 * TCP honours by itself since Linux 4.13), every flow runs at its share
 * from its first byte and no queue builds: the same bytes then move as
 * fast as the ring's (bench/RESULTS.md, "N hosts at the wire").
 *
 * The price: a flow never exceeds its share, also when its peers are idle
 * (a key that lives on one server moves at 1/(N-1) of the link).  Hence
 * off by default: for jobs whose rounds are big keys split over the
 * servers.  Connections within a host (same address, loopback) are never
 * paced.
 *
 * Threads: one pacer belongs to one loop thread.
 */
#ifndef KVS_NET_PACE_H
#define KVS_NET_PACE_H

typedef struct net_pacer net_pacer;

/* A pacer for peers 0..npeers-1 (a worker's servers, a server's worker
 * slots) sharing a link of link_gbps Gbit/s; each peer on another host
 * counts weight flows (a worker of a local group of L: L, its members
 * send at the same time).  who (kept: it must live as long as the pacer)
 * and peer_kind ("server", "worker") name them in the log.  NULL: link_gbps is 0 (nothing paced) or out of memory
 * (logged); every call takes NULL. */
net_pacer *net_pacer_new(double link_gbps, int npeers, int weight, const char *who,
                         const char *peer_kind);
void net_pacer_free(net_pacer *p);

/* A message of peer idx arrived on connection fd (net_msg_fd; -1:
 * unknown).  The first time a connection is seen for a peer: if it goes
 * to another host, it is paced at the link's share, and a peer on another
 * host not counted before lowers the share of every paced connection.
 * Cheap when nothing changed (one comparison).  Returns 1 when it paced
 * a connection now, 0 otherwise. */
int net_pacer_see(net_pacer *p, int idx, int fd);

/* The pacing rate in bytes per second that the connections to other
 * hosts have now (0: none seen yet), and how many peers share the link. */
double net_pacer_rate(const net_pacer *p, int *remote_peers);

/* Whether the TCP connection on fd goes to another host: both ends IPv4,
 * other addresses, the peer's not loopback.  0 also when fd is no such
 * socket. */
int net_fd_remote(int fd);

#endif
