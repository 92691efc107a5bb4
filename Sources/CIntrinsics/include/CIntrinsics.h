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

// The search in a version-4 directory file's keys (nodes of eight, docs/FORMAT.md):
// in C because the step must compile to eight compares summed without a branch, and
// Swift's optimizer left the batched loop at three times the C loop's cost.
// Keys of `node` below `x`: the child to go down to.
static inline intptr_t lookupd_node_rank(const uint64_t *node, uint64_t x) {
    return (intptr_t)(node[0] < x) + (node[1] < x) + (node[2] < x) + (node[3] < x)
         + (node[4] < x) + (node[5] < x) + (node[6] < x) + (node[7] < x);
}

// One search down `nodes` nodes: the slot of the smallest key not below `x`, or -1.
static inline intptr_t lookupd_search_nodes(const uint64_t *keys, intptr_t nodes, uint64_t x) {
    intptr_t node = 0, candidate = -1;
    while (node < nodes) {
        intptr_t i = lookupd_node_rank(keys + 8 * node, x);
        if (i < 8) candidate = 8 * node + i;
        node = 9 * node + i + 1;
    }
    return candidate;
}

// `width` (at most 32) searches interleaved, each one node down per round, each
// prefetching its next node for the round after: `slots[j]` as lookupd_search_nodes.
static inline void lookupd_search_nodes_batch(const uint64_t *keys, intptr_t nodes, const uint64_t *xs,
                                              intptr_t *slots, intptr_t width) {
    intptr_t at[32];
    for (intptr_t j = 0; j < width; j++) { at[j] = 0; slots[j] = -1; }
    int active = nodes > 0;
    while (active) {
        active = 0;
        for (intptr_t j = 0; j < width; j++) {
            intptr_t node = at[j];
            if (node >= nodes) continue;
            active = 1;
            intptr_t i = lookupd_node_rank(keys + 8 * node, xs[j]);
            if (i < 8) slots[j] = 8 * node + i;
            intptr_t child = 9 * node + i + 1;
            at[j] = child;
            if (child < nodes) __builtin_prefetch(keys + 8 * child, 0, 3);
        }
    }
}

#endif
