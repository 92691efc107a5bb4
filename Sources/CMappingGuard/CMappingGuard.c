#define _GNU_SOURCE
#include "CMappingGuard.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct lookupd_guard_slot lookupd_guard_slots[LOOKUPD_GUARD_SLOTS];

static struct sigaction previous;
static pthread_once_t installed = PTHREAD_ONCE_INIT;
static int install_failed;
static uint64_t faults;
static uintptr_t page_size;

// Runs on the faulting thread's own stack: a SIGBUS from a mapped read is
// not a stack overflow, so no alternate stack is needed. Only
// async-signal-safe work: atomics and a raw mmap system call.
static void on_sigbus(int signal, siginfo_t *info, void *context) {
    uintptr_t address = (uintptr_t)info->si_addr;
    for (int i = 0; i < LOOKUPD_GUARD_SLOTS; i++) {
        uintptr_t start = __atomic_load_n(&lookupd_guard_slots[i].start, __ATOMIC_ACQUIRE);
        if (start == 0 || address < start || address >= __atomic_load_n(&lookupd_guard_slots[i].end, __ATOMIC_ACQUIRE)) continue;
        // Marked first: a thread that reads the zero page later and then
        // checks the mark sees it.
        __atomic_store_n(&lookupd_guard_slots[i].damaged, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&lookupd_guard_slots[i].faulted, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&faults, 1, __ATOMIC_RELAXED);
        uintptr_t page = address & ~(page_size - 1);
        long mapped = syscall(SYS_mmap, (void *)page, (size_t)page_size, PROT_READ,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (mapped == (long)page) return;
        break;
    }
    // Not ours (or the page could not be replaced): what would have happened without us.
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != NULL) {
        previous.sa_sigaction(signal, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != NULL) {
        previous.sa_handler(signal);
        return;
    }
    // The fault recurs on return and the default action (a core dump) follows.
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &fallback, NULL);
}

static void install(void) {
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &previous) != 0) install_failed = 1;
}

int lookupd_guard_register(const void *base, size_t size) {
    pthread_once(&installed, install);
    if (install_failed || base == NULL || size == 0) return -1;
    for (int i = 0; i < LOOKUPD_GUARD_SLOTS; i++) {
        uintptr_t expected = 0;
        // Claimed with a placeholder start no address matches (1, end 0), then filled.
        if (!__atomic_compare_exchange_n(&lookupd_guard_slots[i].start, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) continue;
        __atomic_store_n(&lookupd_guard_slots[i].damaged, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&lookupd_guard_slots[i].faulted, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&lookupd_guard_slots[i].end, (uintptr_t)base + size, __ATOMIC_RELEASE);
        __atomic_store_n(&lookupd_guard_slots[i].start, (uintptr_t)base, __ATOMIC_RELEASE);
        return i;
    }
    return -1;
}

void lookupd_guard_unregister(int slot) {
    if (slot < 0 || slot >= LOOKUPD_GUARD_SLOTS) return;
    __atomic_store_n(&lookupd_guard_slots[slot].start, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&lookupd_guard_slots[slot].end, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&lookupd_guard_slots[slot].start, 0, __ATOMIC_RELEASE);
}

uint64_t lookupd_guard_faults(void) {
    return __atomic_load_n(&faults, __ATOMIC_RELAXED);
}
