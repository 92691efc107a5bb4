// The SIP parser's C parts: the vectorised header-line scanner, the byte-class
// table of the plain-shape checks and the scratch arena libosip2 allocates
// from. Used by the SIP module only.
#ifndef LOOKUPD_CSIPLEXER_H
#define LOOKUPD_CSIPLEXER_H

#include <stddef.h>
#include <stdint.h>

// A per-thread bump arena for libosip2's allocations (ScratchArena.c).
// lookupd_scratch_begin opens a scope on the calling thread and returns a
// mark; lookupd_scratch_clean(mark) is true when every allocation since then
// came from the arena (so the parsed object may simply be dropped, without
// osip's free functions); lookupd_scratch_end closes the scope and recycles
// the arena. The three hooks are what osip_set_allocators installs.
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

#endif
