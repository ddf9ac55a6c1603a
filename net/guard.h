/* guard.h - bound the connections a listening socket holds for peers that
 * have not identified themselves.
 *
 * ZeroMQ accepts every TCP connection to a bound socket at once and keeps
 * it until the peer closes it.  In an open job a connection that finished
 * the NULL handshake may then stay idle forever, and when the descriptors
 * run out libzmq's listener retries accept() in a busy loop (EMFILE) while
 * the job stalls.  The guard follows the socket's monitor events and
 * classifies every accepted connection (by descriptor):
 *
 *   trusted    the node saw a valid message from it and bound it to a node
 *              (net_guard_trust: a server's first valid request of a worker,
 *              the scheduler's accepted REGISTER), or, with a job secret,
 *              the peer proved the secret in the handshake;
 *   pending    everything else: in the handshake, or idle after it.
 *
 * A pending connection is closed when it is older than
 * KVS_HANDSHAKE_TIMEOUT, when more than KVS_MAX_PENDING_CONN are pending
 * (the oldest goes first: a real node identifies itself within a round
 * trip, an idle one does not), and when the process gets close to its
 * descriptor limit (RLIMIT_NOFILE minus a reserve), so accept() in libzmq
 * does not reach EMFILE.  For the last two a connection gets a grace period
 * first (NET_GUARD_GRACE_MS, at most a tenth of the handshake timeout): a
 * node connecting in the middle of a flood has the time to say who it is;
 * meanwhile the cap may be exceeded and libzmq may retry accept() (EMFILE)
 * for that long.  A pending connection that sends a message the daemon
 * refuses is shut down at once (net_guard_refused).  Trusted connections
 * are never touched.  Closing disconnects the socket in place (connect to
 * AF_UNSPEC; shutdown(fd, SHUT_RDWR) for a socket that cannot), never
 * close(): libzmq owns the descriptor and tears the session down itself
 * when its next read fails.  The disconnect also drops what the kernel
 * received and libzmq has not read yet: a loopback connection's receive
 * buffer autotunes up to net.ipv4.tcp_rmem's maximum (several MiB), and
 * after a shutdown libzmq would still decode all of it, each 2-byte empty
 * frame into a 64-byte message.  One
 * WARN line per episode (from the first closing until no connection is
 * pending any more), with the reason and the counts.
 *
 * A descriptor number is reused as soon as libzmq closes it, and monitor
 * events reach the loop later than that, so every entry also keeps the
 * socket's inode (fstat): an event or a trust for a descriptor that now
 * holds another socket updates the entry instead of misattributing it, and
 * a descriptor is shut down only while it still holds the same socket.
 *
 * Threads: everything on the loop's thread.
 */
#ifndef KVS_NET_GUARD_H
#define KVS_NET_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>

#include "common/config.h"

typedef struct net_guard net_guard;

#define NET_GUARD_GRACE_MS 250

/* Monitor events (net/live.h's net_mon) of the guarded listening socket;
 * hand them to net_guard_event. */
#define NET_GUARD_EVENTS                                                            \
    (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |   \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* A guard for one listening socket of a daemon on loop, with the limits of
 * c (KVS_MAX_PENDING_CONN, KVS_HANDSHAKE_TIMEOUT; with a secret, a proven
 * handshake makes a connection trusted).  who: log prefix, kept by
 * pointer.  Also ignores SIGPIPE in the process (a shut-down connection
 * must not kill a daemon that writes to it).  0 or KVS_ENOMEM. */
int net_guard_new(uv_loop_t *loop, const cfg *c, const char *who, net_guard **out);

/* Before closing anything for the cap or the descriptors, the guard calls
 * flush(arg) (e.g. net_sock_drain_now of the guarded socket), so that a
 * node's first message already received marks its connection trusted
 * first. */
void net_guard_set_flush(net_guard *g, void (*flush)(void *arg), void *arg);

/* Stop; NULL is a no-op.  Call before the loop is closed. */
void net_guard_free(net_guard *g);

/* A monitor event of the guarded socket (value: the connection's fd).
 * g NULL: no-op. */
void net_guard_event(net_guard *g, int event, int value);

/* The connection on fd (net_msg_fd of a valid message) belongs to a node
 * of the job: never close it.  fd < 0 or g NULL: no-op. */
void net_guard_trust(net_guard *g, int fd);

/* Whether the connection on fd (net_msg_fd of a message) is trusted: a
 * daemon answers a malformed message only on a trusted connection, so an
 * outsider's stream of garbage costs it no answers (and no send queue).
 * A descriptor may have been reused since the message arrived: use the
 * answer for nothing but that choice.  g NULL: true. */
bool net_guard_trusted(net_guard *g, int fd);

/* The daemon refused a message (malformed, or from no node of the job)
 * that came on fd (net_msg_fd) from the peer with routing id ident.  A
 * trusted connection is kept: returns true, answer it.  Otherwise returns
 * false (no answer), and the connection now on fd is shut down at once: a
 * node identifies itself with its first message, and in an open job the
 * listening sockets read without a high-water mark (net/auth.c), so every
 * further message of a stranger would queue in memory faster than the loop
 * drops it.  A descriptor may hold another connection by the time the
 * message is read, so the guard leaves alone a connection on fd that is
 * trusted, or has received fewer than NET_GUARD_REFUSE_MIN bytes (TCP: a
 * node's new connection before it could say who it is), and it remembers
 * the routing ids it shut (the last NET_GUARD_RING): the rest of such a
 * connection's queue, read later, costs no further shutdowns.  g NULL:
 * true. */
#define NET_GUARD_REFUSE_MIN 16384
#define NET_GUARD_RING 1024
bool net_guard_refused(net_guard *g, int fd, const void *ident, size_t ident_len);

/* Counters: connections pending now, trusted now, and closed by the guard
 * so far (all reasons; closed_refused: net_guard_refused). */
typedef struct net_guard_stats {
    uint64_t pending;
    uint64_t trusted;
    uint64_t closed;
    uint64_t closed_timeout, closed_cap, closed_fds, closed_refused;
} net_guard_stats;
void net_guard_get_stats(const net_guard *g, net_guard_stats *st);

/* The inode of the socket on fd, or 0 when fd holds no socket now: which
 * connection a descriptor number means at this moment (monitor events name
 * descriptors that libzmq may have closed and reused since).  Any thread. */
uint64_t net_sock_ino(int fd);

/* Descriptors kept free below RLIMIT_NOFILE for a limit of nofile (the
 * daemon's own files, pidfds, reconnects). */
uint64_t net_guard_reserve(uint64_t nofile);

#endif
