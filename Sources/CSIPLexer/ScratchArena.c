// A per-thread bump arena for libosip2's allocations (osip_set_allocators).
//
// libosip2 allocates every piece of a header it parses (about 170 malloc/free
// pairs for one INVITE's From, To, Via, Call-ID, CSeq and Request-URI), and
// lookupd throws the parsed object away at once: it only wants the verdict.
// Inside a scratch scope (lookupd_scratch_begin .. _end on one thread) those
// allocations are carved from a thread-local buffer and the whole scope is
// dropped by resetting an offset. Outside a scope, or when the buffer is
// full, the hooks fall back to malloc, and such a fallback is counted so the
// caller knows it must run osip's own free functions. free() is a no-op only
// for pointers inside this thread's buffer; everything else goes to free().
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "CSIPLexer.h"

#define SCRATCH_CAPACITY ((size_t)64 * 1024)
#define SCRATCH_ALIGN ((size_t)16)

struct scratch {
    char *base;
    size_t used;
    int active;
    unsigned long fallbacks;
};

static __thread struct scratch scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_release(void *buffer) { free(buffer); }
static void scratch_make_key(void) { (void)pthread_key_create(&scratch_key, scratch_release); }

static inline int scratch_owns(const void *p) {
    const char *c = (const char *)p;
    return scratch.base != NULL && c >= scratch.base && c < scratch.base + SCRATCH_CAPACITY;
}

unsigned long lookupd_scratch_begin(void) {
    if (scratch.base == NULL) {
        char *buffer = malloc(SCRATCH_CAPACITY);
        if (buffer != NULL) {
            // The key's destructor frees the buffer when the thread exits.
            pthread_once(&scratch_once, scratch_make_key);
            if (pthread_setspecific(scratch_key, buffer) == 0) scratch.base = buffer;
            else free(buffer);
        }
    }
    scratch.used = 0;
    scratch.active = scratch.base != NULL;
    return scratch.fallbacks;
}

int lookupd_scratch_clean(unsigned long mark) {
    return scratch.active && scratch.fallbacks == mark;
}

void lookupd_scratch_end(void) {
    scratch.active = 0;
    scratch.used = 0;
}

void *lookupd_scratch_malloc(size_t size) {
    if (scratch.active) {
        size_t rounded = (size + SCRATCH_ALIGN - 1) & ~(SCRATCH_ALIGN - 1);
        if (rounded == 0) rounded = SCRATCH_ALIGN;
        if (rounded >= size && SCRATCH_CAPACITY - scratch.used >= rounded) {
            void *p = scratch.base + scratch.used;
            scratch.used += rounded;
            return p;
        }
        scratch.fallbacks++;
    }
    return malloc(size);
}

void lookupd_scratch_free(void *p) {
    if (p == NULL || scratch_owns(p)) return;
    free(p);
}

void *lookupd_scratch_realloc(void *p, size_t size) {
    if (p == NULL) return lookupd_scratch_malloc(size);
    if (!scratch_owns(p)) return realloc(p, size);
    // The old block's size is not recorded; copying up to the end of the
    // buffer (never past it) keeps whatever the old block held.
    void *q = lookupd_scratch_malloc(size);
    if (q == NULL) return NULL;
    size_t available = (size_t)(scratch.base + SCRATCH_CAPACITY - (char *)p);
    memmove(q, p, size < available ? size : available);
    return q;
}
