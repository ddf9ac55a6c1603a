/* addr.c - endpoints, port files and what identifies this process's host. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "net/net.h"

uint64_t net_pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int net_check_host(const char *host, const char *what, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(why, whylen, "cannot resolve %s='%s': %s", what, host, gai_strerror(rc));
        return KVS_ENET;
    }
    freeaddrinfo(res);
    return 0;
}

int net_bound_port(void *zsock, char *endpoint, size_t len)
{
    char buf[512];
    size_t n = sizeof buf;
    if (zmq_getsockopt(zsock, ZMQ_LAST_ENDPOINT, buf, &n) != 0)
        return -1;
    if (endpoint)
        snprintf(endpoint, len, "%s", buf);
    if (strncmp(buf, "tcp://", 6) != 0)
        return -1;
    const char *colon = strrchr(buf, ':');
    if (colon == NULL)
        return -1;
    return atoi(colon + 1);
}

int net_write_port_file(const char *path, int port)
{
    char tmp[4200];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL)
        return -errno;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}
