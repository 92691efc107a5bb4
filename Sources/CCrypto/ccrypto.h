/* Shim between Swift and OpenSSL's libcrypto (Debian libssl-dev): SHA-256 of downloaded feeds. */
#ifndef LOOKUPD_CCRYPTO_H
#define LOOKUPD_CCRYPTO_H

#include <openssl/evp.h>

#endif
