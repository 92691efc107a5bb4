// Header-line scanning for the SIP parser (SIPParser.scanHeaders): one pass
// over the header section, 32 bytes at a time with SSE2 where available,
// recording for each line where its LF is, where its first ':' is and
// whether it holds a byte that needs a closer look (a CR that is not part of
// the line's CR LF, or a NUL). Everything else the parser decides in Swift.
#include <stdint.h>
#include <string.h>
#include "CSIPLexer.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline int lookupd_is_empty_line(const uint8_t *p, size_t start, size_t lf) {
    return lf == start || (lf == start + 1 && p[start] == '\r');
}

size_t lookupd_sip_lines(const uint8_t *p, size_t n, size_t start,
                         struct lookupd_sip_line *out, size_t capacity) {
    size_t count = 0;
    if (capacity == 0) return 0;
    size_t line_start = start;
    uint32_t colon = LOOKUPD_SIP_NONE;
    uint32_t flags = 0;
#if defined(__SSE2__)
    const __m128i lf_v = _mm_set1_epi8('\n'), cr_v = _mm_set1_epi8('\r');
    const __m128i colon_v = _mm_set1_epi8(':'), zero_v = _mm_setzero_si128();
    // A CR in the last byte of the previous block: suspect unless this block starts with LF.
    uint32_t carry_cr = 0;
    for (size_t i = start; i < n; i += 32) {
        // May read up to 31 bytes past p + n: the caller guarantees they are readable.
        __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(p + i + 16));
        uint32_t lf = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, lf_v)) |
                      ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, lf_v)) << 16);
        uint32_t cr = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, cr_v)) |
                      ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, cr_v)) << 16);
        uint32_t nul = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, zero_v)) |
                       ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, zero_v)) << 16);
        uint32_t co = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, colon_v)) |
                      ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, colon_v)) << 16);
        if (n - i < 32) {
            uint32_t valid = (uint32_t)((1ull << (n - i)) - 1);
            lf &= valid; cr &= valid; nul &= valid; co &= valid;
        }
        // The previous block's final CR belongs to the line still open, before any LF here.
        if (carry_cr && !(lf & 1)) flags = 1;
        carry_cr = cr >> 31;
        // A CR directly followed by LF ends its line; any other CR is suspect. The final CR of
        // the block is judged with the next block (carry_cr).
        uint32_t bad = ((cr & ~(lf >> 1)) & 0x7FFFFFFFu) | nul;
        uint32_t consumed = 0;  // bits of this block that belong to finished lines
        while (lf) {
            uint32_t q = (uint32_t)__builtin_ctz(lf);
            uint32_t below = q == 0 ? 0 : (0xFFFFFFFFu >> (32 - q));
            uint32_t segment = below & ~consumed;
            if (bad & segment) flags = 1;
            if (colon == LOOKUPD_SIP_NONE && (co & segment)) colon = (uint32_t)(i + (size_t)__builtin_ctz(co & segment));
            size_t at = i + q;
            out[count].lf = (uint32_t)at;
            out[count].colon = colon;
            out[count].flags = flags;
            count++;
            if (count == capacity || lookupd_is_empty_line(p, line_start, at)) return count;
            line_start = at + 1;
            colon = LOOKUPD_SIP_NONE;
            flags = 0;
            consumed = below | (1u << q);
            lf &= lf - 1;
        }
        uint32_t segment = ~consumed;
        if (bad & segment) flags = 1;
        if (colon == LOOKUPD_SIP_NONE && (co & segment)) colon = (uint32_t)(i + (size_t)__builtin_ctz(co & segment));
    }
    // A CR as the very last byte is followed by nothing: suspect.
    if (carry_cr) flags = 1;
#else
    for (size_t i = start; i < n; i++) {
        uint8_t b = p[i];
        if (b == '\n') {
            out[count].lf = (uint32_t)i;
            out[count].colon = colon;
            out[count].flags = flags;
            count++;
            if (count == capacity || lookupd_is_empty_line(p, line_start, i)) return count;
            line_start = i + 1;
            colon = LOOKUPD_SIP_NONE;
            flags = 0;
        } else if (b == ':') {
            if (colon == LOOKUPD_SIP_NONE) colon = (uint32_t)i;
        } else if (b == 0 || (b == '\r' && !(i + 1 < n && p[i + 1] == '\n'))) {
            flags = 1;
        }
    }
#endif
    // No LF after the last line start: the caller sees lf == n.
    out[count].lf = (uint32_t)n;
    out[count].colon = colon;
    out[count].flags = flags;
    return count + 1;
}
