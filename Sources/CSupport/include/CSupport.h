// Tiny compiler intrinsics Swift cannot spell directly. Header-only so that
// the calls inline into the Swift hot paths that use them.
#ifndef LOOKUPD_CSUPPORT_H
#define LOOKUPD_CSUPPORT_H

// Hint the CPU to start fetching a cache line we will read soon; the
// directory search issues it for nodes four levels below the current one.
static inline void lookupd_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#endif
