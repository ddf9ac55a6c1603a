/* kvs-keygen - make a CURVE key pair for one node of a job that uses key
 * files (KVS_CURVE_SERVER_KEY, KVS_CURVE_CLIENT_KEY, KVS_CURVE_AUTHORIZED;
 * docs/guide/security.md).
 *
 *   kvs-keygen [--role worker|server|listener] [--force] NAME
 *   kvs-keygen --help | --version
 *
 * writes NAME.key (the public key, mode 0644) and NAME.key_secret (both
 * keys, mode 0600) in ZeroMQ's certificate format, and prints the line that
 * lets the key in, for KVS_CURVE_AUTHORIZED ("worker <public key> NAME").
 * --role listener makes the scheduler's and servers' shared key pair
 * (KVS_CURVE_SERVER_KEY; nothing to authorize).  Existing files are kept
 * unless --force.  Exit 0, 1 (cannot write), 2 (usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "kvs.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvs-keygen [--role worker|server|listener] [--force] NAME\n"
               "  writes NAME.key (public, 0644) and NAME.key_secret (0600); prints the\n"
               "  KVS_CURVE_AUTHORIZED line for a worker or server key\n");
}

static int write_file(const char *path, mode_t mode, int force, const char *role,
                      const char *pub, const char *sec)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
    int fd = open(path, flags, mode);
    FILE *f;
    if (fd < 0) {
        fprintf(stderr, "kvs-keygen: cannot create %s: %s%s\n", path, strerror(errno),
                errno == EEXIST ? " (--force replaces it)" : "");
        return 1;
    }
    if (fchmod(fd, mode) != 0 || (f = fdopen(fd, "w")) == NULL) {
        fprintf(stderr, "kvs-keygen: %s: %s\n", path, strerror(errno));
        close(fd);
        return 1;
    }
    fprintf(f, "#   kvsd CURVE key (ZeroMQ certificate format)%s\n",
            sec ? "\n#   SECRET: keep it on this node only, mode 0600" : "");
    fprintf(f, "metadata\n    role = \"%s\"\ncurve\n    public-key = \"%s\"\n", role, pub);
    if (sec)
        fprintf(f, "    secret-key = \"%s\"\n", sec);
    if (fclose(f) != 0) {
        fprintf(stderr, "kvs-keygen: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"role", required_argument, NULL, 'r'},
                                         {"force", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    const char *role = "worker";
    int force = 0, c;
    while ((c = getopt_long(argc, argv, "r:fh", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            role = optarg;
            break;
        case 'f':
            force = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("kvs-keygen (kvsd) %s\n", KVS_VERSION_STRING);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (strcmp(role, "worker") && strcmp(role, "server") && strcmp(role, "listener")) {
        fprintf(stderr, "kvs-keygen: --role '%s': expected worker, server or listener\n", role);
        return 2;
    }
    if (optind + 1 != argc || argv[optind][0] == '\0') {
        usage(stderr);
        return 2;
    }
    const char *name = argv[optind];
    char pub[41], sec[41], path[4096];
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "kvs-keygen: zmq_curve_keypair: %s (libzmq without CURVE?)\n",
                zmq_strerror(zmq_errno()));
        return 1;
    }
    if (snprintf(path, sizeof path, "%s.key_secret", name) >= (int)sizeof path) {
        fprintf(stderr, "kvs-keygen: name too long\n");
        return 2;
    }
    int rc = write_file(path, 0600, force, role, pub, sec);
    memset(sec, 0, sizeof sec);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s.key", name);
    if (write_file(path, 0644, force, role, pub, NULL))
        return 1;
    if (strcmp(role, "listener") != 0)
        printf("%s %s %s\n", role, pub, name);
    return 0;
}
