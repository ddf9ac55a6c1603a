/* tcpinfo.h - what the kernel counts for a TCP connection.  Apart from the
 * other net/ headers: the kernel's struct tcp_info (linux/tcp.h) clashes
 * with glibc's older one (netinet/tcp.h), which uv.h includes. */
#ifndef KVS_NET_TCPINFO_H
#define KVS_NET_TCPINFO_H

#include <stdint.h>

/* Bytes the TCP connection on fd has received so far (its handshake
 * included), or UINT64_MAX when fd holds no TCP socket or the kernel does
 * not count them.  Any thread. */
uint64_t net_tcp_received(int fd);

#endif
