/* kvs-guard - run a command that dies with its launcher.
 *
 *   kvs-guard PID -- CMD [ARGS...]
 *   kvs-guard --version | --help
 *
 * Execs CMD (same pid, same process group, same file descriptors), after
 * forking a small watcher that waits for process PID (kvs-launch) to end.
 * When PID ends, by any means including SIGKILL, the watcher sends SIGTERM
 * to CMD's process group, and SIGKILL after 3 s if CMD is still there.  So
 * no process of a job outlives its launcher.
 *
 * The watcher ends with CMD: it asks the kernel for SIGKILL when its parent
 * (CMD after the exec) dies (PR_SET_PDEATHSIG).  Caveat of that mechanism:
 * the signal comes when the parent *thread* that forked it ends; that is
 * CMD's main thread, so a CMD whose main thread calls pthread_exit() while
 * other threads go on loses the guard early (nothing worse).  The watcher
 * ignores SIGTERM/SIGINT/SIGHUP, so that stopping the group stops CMD
 * first; it holds no descriptor of CMD's (its stdio is /dev/null), so pipes
 * close when CMD exits.
 *
 * Waiting for PID uses a pidfd (Linux >= 5.3); elsewhere it polls every
 * 100 ms.  Exit status: CMD's; 127 if CMD cannot be run, 2 on bad usage, 1
 * if PID is already gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kvs.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define GRACE_MS 3000

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Block until pid has ended (pidfd >= 0: poll it; else poll kill(pid, 0)). */
static void wait_gone(pid_t pid, int pidfd)
{
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        for (;;) {
            int r = poll(&p, 1, -1);
            if (r > 0 || (r < 0 && errno != EINTR))
                return;
        }
    }
    while (kill(pid, 0) == 0 || errno == EPERM)
        nap_ms(100);
}

static void watcher(pid_t launcher, int pidfd, pid_t cmd)
{
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
    for (int i = 3; i < 1024; i++)
        if (i != pidfd)
            close(i);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != cmd)
        _exit(0); /* the command is already gone (or we cannot follow it) */
    wait_gone(launcher, pidfd);
    pid_t pg = getpgid(cmd);
    if (pg > 0 && pg == getpgrp())
        kill(-pg, SIGTERM); /* we ignore it ourselves */
    else
        kill(cmd, SIGTERM);
    for (int t = 0; t < GRACE_MS; t += 50) {
        nap_ms(50);
        if (getppid() != cmd)
            _exit(0); /* (PDEATHSIG normally ends us first) */
    }
    if (pg > 0 && pg == getpgrp())
        kill(-pg, SIGKILL); /* ends us too */
    kill(cmd, SIGKILL);
    _exit(0);
}

int main(int argc, char **argv)
{
    char *end;
    /* options only as the first argument: everything after PID -- is the command's */
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("kvs-guard (kvsd) %s\n", KVS_VERSION_STRING);
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: kvs-guard PID -- CMD [ARGS...]\n"
               "       kvs-guard --version | --help\n"
               "Exec CMD; when process PID ends (even by SIGKILL), SIGTERM CMD's process\n"
               "group, SIGKILL after %d s.  Used by kvs-launch for the processes it starts.\n",
               GRACE_MS / 1000);
        return 0;
    }
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: kvs-guard PID -- CMD [ARGS...]\n");
        return 2;
    }
    errno = 0;
    long v = strtol(argv[1], &end, 10);
    if (errno || *end || end == argv[1] || v <= 1 || v > 0x7fffffffL) {
        fprintf(stderr, "kvs-guard: '%s' is not a process id\n", argv[1]);
        return 2;
    }
    pid_t launcher = (pid_t)v, self = getpid();
    int pidfd = (int)syscall(SYS_pidfd_open, launcher, 0);
    if (pidfd < 0 && errno == ESRCH) {
        fprintf(stderr, "kvs-guard: process %ld (the launcher) is gone; not starting %s\n", v,
                argv[3]);
        return 1;
    }
    pid_t w = fork();
    if (w == 0)
        watcher(launcher, pidfd, self);
    if (w < 0)
        fprintf(stderr, "kvs-guard: fork: %s; %s runs unguarded\n", strerror(errno), argv[3]);
    if (pidfd >= 0)
        close(pidfd);
    execvp(argv[3], argv + 3);
    fprintf(stderr, "kvs-guard: cannot run %s: %s\n", argv[3], strerror(errno));
    return 127;
}
