#ifndef LOOKUPD_C_TEST_SUPPORT_H
#define LOOKUPD_C_TEST_SUPPORT_H

#include <sys/types.h>

/// What to start: the program, its argv and envp (NULL-terminated), the
/// folder to start it in (NULL: ours) and the descriptors that become its
/// standard input, output and error.
typedef struct {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *directory;
    int input;
    int output;
    int error;
} lookupd_test_spawn_request;

/// Starts a child in a process group of its own that dies with this process:
/// the kernel sends it SIGKILL when this process ends (PR_SET_PDEATHSIG), and
/// a guardian shell kills its whole group then (its own children included).
/// Returns the pid, or -errno (exec failures are reported here, not by a
/// child exiting 127).
pid_t lookupd_test_spawn(const lookupd_test_spawn_request *request);

/// Sleeps until `pid` has exited (without reaping it) or `milliseconds`
/// have passed, whichever comes first; the caller reaps with waitpid.
void lookupd_test_await_exit(pid_t pid, int milliseconds);

/// If `pid` has exited: kills what is left of its process group while its pid
/// is still reserved (a zombie's pid cannot be reused), tells the guardian the
/// group is gone, reaps it and returns 1 with the wait status in *status.
/// 0 while it runs, -errno on error.
int lookupd_test_reap(pid_t pid, int *status);

/// The guardian's pid (0 before the first spawn): for the test that checks it.
pid_t lookupd_test_guardian(void);

#endif
