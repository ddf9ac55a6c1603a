/* net.h - ZeroMQ sockets driven by a libuv loop.
 *
 * A net_sock wraps one ZeroMQ socket owned by the loop's thread: it polls
 * ZMQ_FD (edge-triggered) and drains with ZMQ_DONTWAIT after every wake-up
 * and after every loop iteration (uv_check), so the socket never stalls.
 * Sends never block: a message that meets the high-water mark waits in a
 * FIFO owned by the socket and leaves when ZeroMQ reports POLLOUT.
 *
 * Threads: every function must be called on the loop's thread, except the
 * zero-copy free callbacks, which ZeroMQ calls on its own I/O thread.
 */
#ifndef KVS_NET_H
#define KVS_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>

#include "proto/proto.h"

#define NET_MAX_FRAMES 3 /* routing id + header + body: kept without an allocation */
/* Body frames one message may have: a body larger than a socket's frame
 * size (net_sock_set_split) travels as several frames of one message. */
#define NET_MAX_BODY_FRAMES 4096

typedef struct net_sock net_sock;

/* One received multipart message.  frames[0..nframes) are valid zmq_msg_t
 * (frames points at inl, or at an array net allocated for a message of
 * more than NET_MAX_FRAMES frames); total is how many frames arrived (more
 * than nframes: the extra ones were dropped and the message is malformed).
 * The callback owns nothing: net closes the frames after it returns, unless
 * the callback moved a frame out with zmq_msg_move. */
typedef struct net_msg {
    zmq_msg_t inl[NET_MAX_FRAMES];
    zmq_msg_t *frames;
    int nframes;
    int total;
    int cap;
} net_msg;

typedef void (*net_recv_fn)(net_sock *s, net_msg *m, void *arg);

/* An empty message (frames at inl).  net_msg_room: room for one more frame
 * at frames[nframes], growing past the inline ones up to NET_MAX_FRAMES +
 * NET_MAX_BODY_FRAMES; false: none (out of memory, or past the limit), and
 * the frame is to be dropped.  net_msg_close: closes the frames, frees a
 * grown array and leaves m empty.  (net's receive path, and tests that
 * build messages as it does.) */
void net_msg_init(net_msg *m);
bool net_msg_room(net_msg *m);
void net_msg_close(net_msg *m);

/* Largest frame a socket accepts unless net_sock_set_max raises it: control
 * messages (registration, errors) fit; ZeroMQ drops a connection that
 * declares a bigger frame before buffering any of it (ZMQ_MAXMSGSIZE). */
#define NET_CTRL_MAX (64u << 10)

/* Create a socket of ZeroMQ type (ZMQ_ROUTER, ZMQ_DEALER) on loop, calling
 * fn(s, msg, arg) for every message.  Sets linger 0, the water marks,
 * ZMQ_MAXMSGSIZE = NET_CTRL_MAX, and ROUTER_MANDATORY on routers.
 * Returns 0 or KVS_ENET/KVS_ENOMEM. */
int net_sock_new(uv_loop_t *loop, void *zctx, int type, int water_mark, net_recv_fn fn,
                 void *arg, net_sock **out);

/* Accept frames of up to max(bytes, NET_CTRL_MAX) bytes (ZMQ_MAXMSGSIZE).
 * Call before bind/connect.  Returns 0 or KVS_ENET. */
int net_sock_set_max(net_sock *s, uint64_t bytes);

/* The ZeroMQ socket, for bind/connect/setsockopt before traffic starts. */
void *net_sock_zmq(net_sock *s);

/* Start polling (after bind/connect).  Returns 0 or KVS_ENET. */
int net_sock_start(net_sock *s);

/* Close: drops queued sends, closes the ZeroMQ socket and the uv handles.
 * May be called from inside a receive callback of s (takes effect after it).
 * net_sock_free(NULL) is a no-op. */
void net_sock_free(net_sock *s);

/* Bodies larger than bytes leave as several frames of at most bytes
 * (a multiple of 8) each, in one message: pieces of the caller's body, no
 * copy; the body is released once ZeroMQ released every piece.  0: never
 * split (the default). */
void net_sock_set_split(net_sock *s, uint64_t bytes);

/* Send [ident] + header + [body].  ident/ident_len: routing id for ROUTER
 * sockets (NULL for DEALER).  body: NULL, or a message whose content moves to
 * net (the caller's zmq_msg_t is left empty and must still be closed, which is
 * harmless).  Returns 0 (sent or queued), or KVS_ENET when the peer is
 * unknown (ROUTER) or the socket failed; the message is dropped then. */
int net_send(net_sock *s, const void *ident, size_t ident_len, const proto_hdr *h,
             zmq_msg_t *body);

/* Like net_send, with nextra more frames after the body (a fused message's
 * record frames, proto.h): each moves to net as body does, and the body is
 * never split.  nextra > 0 needs a body (KVS_EINVAL otherwise, the frames
 * closed). */
int net_sendv(net_sock *s, const void *ident, size_t ident_len, const proto_hdr *h,
              zmq_msg_t *body, zmq_msg_t *extra, int nextra);

/* Like net_send with a text body (copied). */
int net_send_text(net_sock *s, const void *ident, size_t ident_len, proto_hdr *h,
                  const char *text);

/* Priority order (servers): from now on net_send only queues; what was
 * queued leaves at the end of the current drain of received messages (at
 * least every 32 of them) or on the next loop turn, highest
 * proto_hdr.priority first, equal priorities in the order sent. */
void net_sock_set_prio(net_sock *s, bool on);

/* Traffic counting (metrics): fn(arg, ident, ident_len, bytes, out) for
 * every message received (out 0) and every message accepted for sending
 * (out 1).  bytes: the header and body frames; ident: the routing id (ROUTER
 * sockets; NULL on others).  fn NULL: off (the default). */
typedef void (*net_count_fn)(void *arg, const void *ident, size_t ident_len, uint64_t bytes,
                             int out);
void net_sock_count(net_sock *s, net_count_fn fn, void *arg);

/* Receive and dispatch what has arrived on s now (as after a wake-up), e.g.
 * before deciding something that depends on messages already received.
 * No-op inside s's own receive callback. */
void net_sock_drain_now(net_sock *s);

/* Messages waiting for the high-water mark to clear. */
size_t net_sock_queued(const net_sock *s);


/* Decode the kvsd message in m: [routing id,] header [, body].  routed: m
 * came from a ROUTER socket, so frame 0 is the sender's routing id.  Checks
 * the frame count and everything proto_decode checks.  Returns 0 with *h and
 * *body (the body frame, or NULL) set, or KVS_EPROTO / KVS_ETOOBIG with why.
 * A body in several frames is KVS_EPROTO here (see net_msg_decode_frames). */
int net_msg_decode(net_msg *m, bool routed, const proto_limits *lim, proto_hdr *h,
                   zmq_msg_t **body, char *why, size_t whylen);

/* As net_msg_decode, for a body in one or more frames: *body points at the
 * first body frame in m and *nbody is how many (0: no body).  The frames'
 * total is the body (checked against the header and lim->max_message
 * before anything else reads it); every body frame but the last holds a
 * multiple of 8 bytes, so no element of any dtype straddles two frames.
 * A fused message (FUSED, FUSED_REF, FUSED_REPLY) is the exception: its
 * body is the first body frame alone and the frames after it are its
 * records' frames (proto.h, PROTO_F_FRAME), each at most lim->max_message
 * bytes; the records say what they hold. */
int net_msg_decode_frames(net_msg *m, bool routed, const proto_limits *lim, proto_hdr *h,
                          zmq_msg_t **body, int *nbody, char *why, size_t whylen);

/* The port of the last endpoint zsock bound ("tcp://0.0.0.0:5555" -> 5555),
 * or -1 (ipc://, error). */
int net_bound_port(void *zsock, char *endpoint, size_t len);

/* Can host (a name or an address) be resolved?  0, or KVS_ENET with
 * "cannot resolve <what>='host': <reason>" in why.  Blocks for the lookup. */
int net_check_host(const char *host, const char *what, char *why, size_t whylen);

/* The pid namespace this process runs in (the inode of /proc/self/ns/pid;
 * 0 when unknown): with the registered address, a node's host identity
 * (docs/design.md "Host identity"). */
uint64_t net_pidns(void);

/* Write "port\n" to path atomically (temp file + rename).  0 or -errno. */
int net_write_port_file(const char *path, int port);

#endif
