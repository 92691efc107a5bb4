/*
 * libcurl (Debian libcurl4-openssl-dev) for `lookupd update` and the etcd replication, opened
 * with dlopen on the first call (ccurl.c says why). The types and constants are curl.h's; the
 * functions lookupd calls are these, each forwarding to the library's own.
 *
 * curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: each argument
 * type lookupd passes gets a typed wrapper here.
 */
#ifndef LOOKUPD_CCURL_H
#define LOOKUPD_CCURL_H

#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *context);

/* Loads libcurl now if it is not loaded yet: 1 when it is, else 0. */
int ccurl_load(void);
/* Why libcurl cannot be used, for an error after a failed ccurl_global_init or easy/multi init:
 * "cannot load libcurl.so.4: REASON", or "cannot initialize libcurl" when it is loaded. */
const char *ccurl_problem(void);

CURLcode ccurl_global_init(long flags);
CURL *ccurl_easy_init(void);
void ccurl_easy_cleanup(CURL *handle);
void ccurl_easy_reset(CURL *handle);
CURLcode ccurl_easy_perform(CURL *handle);
const char *ccurl_easy_strerror(CURLcode code);
struct curl_slist *ccurl_slist_append(struct curl_slist *list, const char *text);
void ccurl_slist_free_all(struct curl_slist *list);
CURLM *ccurl_multi_init(void);
CURLMcode ccurl_multi_cleanup(CURLM *multi);
CURLMcode ccurl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode ccurl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode ccurl_multi_perform(CURLM *multi, int *running);
CURLMcode ccurl_multi_poll(CURLM *multi, struct curl_waitfd *extra, unsigned count, int timeout_ms, int *numfds);
CURLMcode ccurl_multi_wakeup(CURLM *multi);
CURLMsg *ccurl_multi_info_read(CURLM *multi, int *left);

CURLcode ccurl_set_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_set_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode ccurl_set_pointer(CURL *handle, CURLoption option, const void *value);
CURLcode ccurl_set_callback(CURL *handle, CURLoption option, ccurl_data_callback value);
CURLcode ccurl_get_long(CURL *handle, CURLINFO info, long *value);
CURLcode ccurl_get_string(CURL *handle, CURLINFO info, char **value);

#endif
