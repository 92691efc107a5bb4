// Starting test children so that none outlives the test process.
//
// PR_SET_PDEATHSIG follows the *thread* that forked, not the process: a
// child forked from a worker thread that later ends would be killed early.
// So every fork happens on one thread that lives as long as the process.
// The death signal reaches only the direct child; programs with children
// of their own (Kamailio's workers, a shell script's commands) are swept by
// a guardian shell, which holds one end of a socket pair whose other end
// only this process has: when this process ends, however it ends, the
// guardian reads end-of-file and kills every process group still listed.
#define _GNU_SOURCE
#include "CTestSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static const char guardian_script[] =
    "groups=' '\n"
    "while read -r op group; do\n"
    "  case \"$op\" in\n"
    "    +) groups=\"$groups$group \" ;;\n"
    "    -) left=' '; for g in $groups; do [ \"$g\" = \"$group\" ] || left=\"$left$g \"; done; groups=$left ;;\n"
    "  esac\n"
    "done\n"
    "for g in $groups; do kill -s KILL -- \"-$g\" 2>/dev/null; done\n";

static pthread_once_t started = PTHREAD_ONCE_INIT;
static int start_error;
static pthread_mutex_t serial = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t handoff = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t requested = PTHREAD_COND_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static const lookupd_test_spawn_request *pending;
static pid_t answer;
static int answered_flag;

static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int guard_fd = -1;
static pid_t guardian_pid;

// In the child, between fork and exec: async-signal-safe calls only.
static void become(const lookupd_test_spawn_request *request, int report, pid_t parent, int die_with_parent) {
    setpgid(0, 0);
    if (die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) goto fail;
    struct sigaction standard;
    memset(&standard, 0, sizeof standard);
    standard.sa_handler = SIG_DFL;
    sigemptyset(&standard.sa_mask);
    for (int s = 1; s < 65; s++) sigaction(s, &standard, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    // Lift the sources above 2 first so one dup2 cannot clobber another's source.
    int in = fcntl(request->input, F_DUPFD_CLOEXEC, 3);
    int out = fcntl(request->output, F_DUPFD_CLOEXEC, 3);
    int err = fcntl(request->error, F_DUPFD_CLOEXEC, 3);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) goto fail;
    // Nothing else of ours reaches the program (the report pipe closes at exec).
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        for (int fd = 3; fd < 4096; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (request->directory && chdir(request->directory) != 0) goto fail;
    execve(request->path, request->argv, request->envp);
fail:;
    int code = errno;
    ssize_t ignored = write(report, &code, sizeof code);
    (void)ignored;
    _exit(127);
}

static void tell_guardian(char op, pid_t group) {
    char line[32];
    int n = snprintf(line, sizeof line, "%c %d\n", op, (int)group);
    pthread_mutex_lock(&guard_lock);
    if (guard_fd >= 0) {
        ssize_t ignored = send(guard_fd, line, (size_t)n, MSG_NOSIGNAL);
        (void)ignored;
    }
    pthread_mutex_unlock(&guard_lock);
}

static pid_t fork_and_exec(const lookupd_test_spawn_request *request, int die_with_parent) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return -errno;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) become(request, report[1], parent, die_with_parent);
    int fork_error = errno;
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        return -fork_error;
    }
    setpgid(pid, pid);  // also here, so the group exists before anyone signals it
    if (die_with_parent) tell_guardian('+', pid);
    int code = 0;
    ssize_t n;
    do n = read(report[0], &code, sizeof code); while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof code) {
        int ignored;
        while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {}
        if (die_with_parent) tell_guardian('-', pid);
        return -code;
    }
    return pid;
}

static void start_guardian(void) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    char *argv[] = {"sh", "-c", (char *)guardian_script, "lookupd-test-guardian", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    lookupd_test_spawn_request guardian = {"/bin/sh", argv, envp, "/", pair[0], null < 0 ? pair[0] : null, null < 0 ? pair[0] : null};
    pid_t pid = fork_and_exec(&guardian, 0);
    close(pair[0]);
    if (null >= 0) close(null);
    if (pid < 0) {
        close(pair[1]);
        return;
    }
    pthread_mutex_lock(&guard_lock);
    guard_fd = pair[1];
    guardian_pid = pid;
    pthread_mutex_unlock(&guard_lock);
}

static void *spawner(void *unused) {
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    start_guardian();
    pthread_mutex_lock(&handoff);
    for (;;) {
        while (!pending) pthread_cond_wait(&requested, &handoff);
        answer = fork_and_exec(pending, 1);
        pending = NULL;
        answered_flag = 1;
        pthread_cond_broadcast(&answered);
    }
    return NULL;
}

static void start_spawner(void) {
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    start_error = pthread_create(&thread, &attributes, spawner, NULL);
    pthread_attr_destroy(&attributes);
}

pid_t lookupd_test_spawn(const lookupd_test_spawn_request *request) {
    pthread_once(&started, start_spawner);
    if (start_error) return -start_error;
    pthread_mutex_lock(&serial);
    pthread_mutex_lock(&handoff);
    answered_flag = 0;
    pending = request;
    pthread_cond_signal(&requested);
    while (!answered_flag) pthread_cond_wait(&answered, &handoff);
    pid_t pid = answer;
    pthread_mutex_unlock(&handoff);
    pthread_mutex_unlock(&serial);
    return pid;
}

void lookupd_test_await_exit(pid_t pid, int milliseconds) {
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        // No pidfd (old kernel) or already gone: a short nap, the caller looks again.
        if (errno != ESRCH) usleep((useconds_t)(milliseconds < 5 ? milliseconds : 5) * 1000);
        return;
    }
    struct pollfd exited = {.fd = fd, .events = POLLIN};
    poll(&exited, 1, milliseconds);
    close(fd);
}

int lookupd_test_reap(pid_t pid, int *status) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -errno;
    if (info.si_pid != pid) return 0;
    kill(-pid, SIGKILL);
    tell_guardian('-', pid);
    pid_t reaped;
    do reaped = waitpid(pid, status, 0); while (reaped < 0 && errno == EINTR);
    return reaped == pid ? 1 : -errno;
}

pid_t lookupd_test_guardian(void) {
    pthread_mutex_lock(&guard_lock);
    pid_t pid = guardian_pid;
    pthread_mutex_unlock(&guard_lock);
    return pid;
}
