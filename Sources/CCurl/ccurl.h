/*
 * Shim between Swift and libcurl (Debian libcurl4-openssl-dev), used by `lookupd update` only.
 *
 * curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: each argument
 * type lookupd passes gets a typed static inline wrapper here.
 */
#ifndef LOOKUPD_CCURL_H
#define LOOKUPD_CCURL_H

#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode ccurl_set_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_set_pointer(CURL *handle, CURLoption option, const void *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_set_callback(CURL *handle, CURLoption option, ccurl_data_callback value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_get_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ccurl_get_string(CURL *handle, CURLINFO info, char **value) {
  return curl_easy_getinfo(handle, info, value);
}

#endif
