/*
 * Shim between Swift and libosip2 (osipparser2 only).
 *
 * Only the pieces lookupd uses are exposed. Anything osip provides as a C macro must be wrapped
 * here as a static inline function, because Swift cannot call macros; today that is only the
 * trace set-up, whose callback takes a va_list (awkward to implement in Swift).
 */
#ifndef LOOKUPD_COSIP_H
#define LOOKUPD_COSIP_H

#include <stdarg.h>
#include <stddef.h>
#include <osipparser2/osip_port.h>
#include <osipparser2/osip_list.h>
#include <osipparser2/osip_uri.h>
#include <osipparser2/osip_message.h>
#include <osipparser2/osip_parser.h>
#include <osipparser2/headers/osip_from.h>
#include <osipparser2/headers/osip_via.h>
#include <osipparser2/headers/osip_cseq.h>
#include <osipparser2/headers/osip_call_id.h>

/* A trace sink that discards everything, so that even a level enabled later by mistake never
 * reaches stdout. */
static void cosip_trace_discard(const char *fi, int li, osip_trace_level_t level,
                                const char *chfr, va_list ap) {
  (void)fi; (void)li; (void)level; (void)chfr; (void)ap;
}

/*
 * osip_trace() lazily calls osip_trace_initialize(TRACE_LEVEL3, stdout) the first time it runs
 * without a configured sink: that prints an ERROR line for every malformed packet and races when
 * two threads get there first. Installing a sink with level 0 (no level enabled) before
 * parser_init() removes both problems. Must run before any parse, on one thread.
 */
static inline void cosip_silence_trace(void) {
  osip_trace_initialize_func(TRACE_LEVEL0, cosip_trace_discard);
  for (int level = TRACE_LEVEL0; level < END_TRACE_LEVEL; level++)
    osip_trace_disable_level((osip_trace_level_t)level);
}

#endif
