// CSystemCalls: the few C declarations Swift's Glibc module hides.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CSystemCalls.h"

_Static_assert(sizeof(struct lookupd_mmsghdr) == sizeof(struct mmsghdr), "mmsghdr layout");
_Static_assert(offsetof(struct lookupd_mmsghdr, msg_len) == offsetof(struct mmsghdr, msg_len), "mmsghdr layout");

int lookupd_recvmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags) {
    return recvmmsg(fd, (struct mmsghdr *)messages, count, flags, NULL);
}

int lookupd_sendmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags) {
    return sendmmsg(fd, (struct mmsghdr *)messages, count, flags);
}

int lookupd_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}

long lookupd_copy_file_range(int from, int to, unsigned long length) {
    return (long)copy_file_range(from, NULL, to, NULL, length, 0);
}

int lookupd_o_tmpfile(void) {
    return O_TMPFILE;
}
