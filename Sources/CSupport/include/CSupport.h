// Tiny compiler intrinsics Swift cannot spell directly. Header-only so that
// the calls inline into the Swift hot paths that use them.
#ifndef LOOKUPD_CSUPPORT_H
#define LOOKUPD_CSUPPORT_H

// Hint the CPU to start fetching a cache line we will read soon; the
// directory search issues it for nodes four levels below the current one.
static inline void lookupd_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

// recvmmsg/sendmmsg and struct mmsghdr are only declared with _GNU_SOURCE,
// which Swift's Glibc module is built without; CSupport.c defines it and
// these wrappers take a layout-identical struct.
struct lookupd_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

int lookupd_recvmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags);
int lookupd_sendmmsg(int fd, struct lookupd_mmsghdr *messages, unsigned int count, int flags);
int lookupd_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
long lookupd_copy_file_range(int from, int to, unsigned long length);

// Counters owned by one thread and read by others (stats): relaxed atomic
// load and store, no locked read-modify-write, because only the owner ever
// writes. Plain loads and stores would be a data race in the C memory model
// (and under ThreadSanitizer); these compile to ordinary moves on x86-64.
static inline void lookupd_counter_add(uint64_t *counter, uint64_t amount) {
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + amount, __ATOMIC_RELAXED);
}

static inline uint64_t lookupd_counter_load(const uint64_t *counter) {
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

// A per-thread bump arena for libosip2's allocations (ScratchArena.c).
// lookupd_scratch_begin opens a scope on the calling thread and returns a
// mark; lookupd_scratch_clean(mark) is true when every allocation since then
// came from the arena (so the parsed object may simply be dropped, without
// osip's free functions); lookupd_scratch_end closes the scope and recycles
// the arena. The three hooks are what osip_set_allocators installs.
#include <stddef.h>
unsigned long lookupd_scratch_begin(void);
int lookupd_scratch_clean(unsigned long mark);
void lookupd_scratch_end(void);
void *lookupd_scratch_malloc(size_t size);
void lookupd_scratch_free(void *p);
void *lookupd_scratch_realloc(void *p, size_t size);

// One header line found by lookupd_sip_lines (SIPLines.c): the offset of its
// LF (n when the bytes end first), of its first ':' (LOOKUPD_SIP_NONE when it
// has none) and flags = 1 when it holds a NUL or a CR other than the one of
// its CR LF. Lines start at `start` and right after each LF; the scan stops
// after an empty line, after the last LF, or when `capacity` lines are out.
// It may read up to 31 bytes past p + n, which must be readable.
#define LOOKUPD_SIP_NONE 0xFFFFFFFFu
struct lookupd_sip_line {
    uint32_t lf;
    uint32_t colon;
    uint32_t flags;
};
size_t lookupd_sip_lines(const uint8_t *p, size_t n, size_t start,
                         struct lookupd_sip_line *out, size_t capacity);

// Byte classes of the SIP plain-shape checks (SIPClasses.c): bit flags per byte.
#define LOOKUPD_SIP_USER 0x01u
#define LOOKUPD_SIP_USER_NO_SEMICOLON 0x02u
#define LOOKUPD_SIP_HOST 0x04u
#define LOOKUPD_SIP_IPV6 0x08u
#define LOOKUPD_SIP_URI_PARAMETER 0x10u
#define LOOKUPD_SIP_OPAQUE 0x20u
#define LOOKUPD_SIP_TOKEN 0x40u
extern const uint8_t lookupd_sip_classes[256];
static inline uint8_t lookupd_sip_class(uint8_t b) { return lookupd_sip_classes[b]; }


// prctl(PR_SET_NO_NEW_PRIVS), so that code running in the daemon can never
// gain privileges through exec (setuid files, file capabilities). prctl is
// variadic, which Swift cannot call. Privileges.c.
int lookupd_no_new_privileges(void);

#endif
