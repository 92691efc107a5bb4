// The few Linux declarations Swift's Glibc module hides, for the SystemCalls
// module (Sources/SystemCalls), which is the only Swift code that imports this.
#ifndef LOOKUPD_CSYSTEMCALLS_H
#define LOOKUPD_CSYSTEMCALLS_H

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

// recvmmsg/sendmmsg and struct mmsghdr are only declared with _GNU_SOURCE,
// which Swift's Glibc module is built without; CSystemCalls.c defines it and
// these wrappers take a layout-identical struct.
struct lookupd_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

int lookupd_recvmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags);
int lookupd_sendmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags);
int lookupd_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
long lookupd_copy_file_range(int from, int to, unsigned long length);

// SO_ATTACH_REUSEPORT_CBPF with a program that picks socket (random % count) of the
// SO_REUSEPORT group `fd` belongs to; 0, or -1 with errno. linux/filter.h's macros and
// structs are not imported by Swift.
int lookupd_attach_reuseport_random(int fd, unsigned int count);

// O_TMPFILE, a macro Swift does not import.
int lookupd_o_tmpfile(void);

// prctl(PR_SET_NO_NEW_PRIVS), so that code running in the daemon can never
// gain privileges through exec (setuid files, file capabilities). prctl is
// variadic, which Swift cannot call. Privileges.c.
int lookupd_no_new_privileges(void);

#endif
