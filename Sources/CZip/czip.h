/* Shim between Swift and libzip (Debian libzip-dev), for feeds packed in zip archives. */
#ifndef LOOKUPD_CZIP_H
#define LOOKUPD_CZIP_H

#include <zip.h>

#endif
