// SIGBUS safety for directory files the daemon maps straight from disk
// (directory-copy = no; docs/FORMAT.md "Serving the installed file").
//
// A mapped file truncated in place under a reader makes the next read of a
// vanished page raise SIGBUS; a disk error reading a page does the same.
// Nothing in Swift can catch that, and jumping out of a signal handler
// (siglongjmp) across Swift frames would skip their releases. So the
// handler does not jump: for an address inside a registered mapping it
// marks that mapping damaged and puts a private page of zeros in place of
// the vanished one (mmap MAP_FIXED), then returns; the faulting load runs
// again and reads zeros. The reader never unwinds; it finishes its search
// on zeros and then asks lookupd_guard_damaged, which says the answer must
// not be used. Zeros cannot make a wrong answer even when a reader misses
// the mark: key 0 is no E.164 number, value word 0 neither blocks nor
// labels, a label index of zeros is an empty label (docs/FORMAT.md).
// A fault outside every registered mapping is a real bug: the handler
// puts the previous disposition back and returns, so the fault recurs and
// kills the process as it would have without us.
#ifndef LOOKUPD_CMAPPINGGUARD_H
#define LOOKUPD_CMAPPINGGUARD_H

#include <stddef.h>
#include <stdint.h>

#define LOOKUPD_GUARD_SLOTS 1024

// One registered mapping. `damaged` is set by the handler (a fault) or by
// the daemon (the file changed under it), `faulted` by the handler only;
// neither is ever cleared: a mapping once damaged is replaced, not trusted
// again.
struct lookupd_guard_slot {
    uintptr_t start;
    uintptr_t end;
    int damaged;
    int faulted;
};

extern struct lookupd_guard_slot lookupd_guard_slots[LOOKUPD_GUARD_SLOTS];

// Installs the handler (once per process) and registers [base, base+size);
// the slot number, or -1 when every slot is taken or sigaction fails.
int lookupd_guard_register(const void *base, size_t size);

// Forgets a slot; call before munmap, once no reader uses the mapping.
void lookupd_guard_unregister(int slot);

// Faults the handler turned into zero pages since the process started.
uint64_t lookupd_guard_faults(void);

// Marks a mapping damaged (the daemon saw its file change in place).
static inline void lookupd_guard_mark(int slot) {
    __atomic_store_n(&lookupd_guard_slots[slot].damaged, 1, __ATOMIC_SEQ_CST);
}

// True once the mapping is damaged. The signal fence keeps the compiler
// from moving the reader's loads of the mapping after this check: a fault
// in this thread runs the handler before the load completes, so its mark
// is seen here. (Another thread's fault is seen through the acquire load,
// or at worst the reader read zeros, which answer nothing; see above.)
static inline int lookupd_guard_damaged(int slot) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(&lookupd_guard_slots[slot].damaged, __ATOMIC_ACQUIRE);
}

// True once a page of the mapping was replaced by zeros.
static inline int lookupd_guard_faulted(int slot) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(&lookupd_guard_slots[slot].faulted, __ATOMIC_ACQUIRE);
}

// Reads one byte of every page of [from, from+count) (volatile: the loads
// must happen): a lookup touches its label this way before it asks
// lookupd_guard_damaged, so a vanished label page faults in time to count.
static inline void lookupd_guard_touch(const void *from, size_t count) {
    const volatile unsigned char *bytes = (const volatile unsigned char *)from;
    if (count == 0) return;
    (void)bytes[0];
    for (size_t offset = 4096 - ((uintptr_t)from & 4095); offset < count; offset += 4096) (void)bytes[offset];
    (void)bytes[count - 1];
}

// The current thread's copy of `count` bytes from the mapping at `from`,
// made before asking lookupd_guard_damaged: bytes read after the check
// could come from a page replaced after it.
static inline void lookupd_guard_copy(void *to, const void *from, size_t count) {
    __builtin_memcpy(to, from, count);
}

#endif
