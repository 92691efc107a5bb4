// Compiler intrinsics Swift cannot spell directly. Header-only so that the
// calls inline into the Swift hot paths that use them.
#ifndef LOOKUPD_CINTRINSICS_H
#define LOOKUPD_CINTRINSICS_H

#include <stdint.h>

// Hint the CPU to start fetching a cache line we will read soon; the
// directory search issues it for nodes four levels below the current one.
static inline void lookupd_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

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

#endif
