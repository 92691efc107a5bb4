// CSystemCalls: the few C declarations Swift's Glibc module hides.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
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

// Classic BPF for SO_ATTACH_REUSEPORT_CBPF: the group's socket index is a fresh random
// number modulo `count`, so every datagram (of one flow too, retransmissions included)
// goes to any of the group's sockets with equal chance. The program belongs to the group,
// whichever member it was attached through.
int lookupd_attach_reuseport_random(int fd, unsigned int count) {
    if (count == 0) { errno = EINVAL; return -1; }
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (unsigned int)(SKF_AD_OFF + SKF_AD_RANDOM)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, count),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog program = { .len = sizeof code / sizeof code[0], .filter = code };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof program);
}
