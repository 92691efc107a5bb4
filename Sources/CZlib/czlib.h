/*
 * Shim between Swift and zlib (Debian zlib1g-dev), for gzip-compressed feeds.
 *
 * inflateInit2 is a macro (it passes the library version and the stream size so that zlib can
 * refuse a mismatched header); Swift cannot call macros.
 */
#ifndef LOOKUPD_CZLIB_H
#define LOOKUPD_CZLIB_H

#include <zlib.h>

static inline int czlib_inflate_init(z_streamp stream, int window_bits) {
  return inflateInit2(stream, window_bits);
}

#endif
