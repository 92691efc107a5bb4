// See include/ccurl.h. libcurl is opened with dlopen the first time a process needs it (lookupd
// update, the etcd replication), not linked: linked, it brought some 27 objects (OpenSSL,
// GnuTLS, Kerberos, LDAP, SASL, SSH, nghttp2, brotli, libidn2 ...) into every lookupd process,
// `lookupd query` and `--help` included, and mapping and relocating them cost about 10 ms of
// CPU per process, half a short command's (docs/BENCHMARKS.md "Start-up").
#include "ccurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// The soname libcurl4-openssl-dev links against; the package depends on it (scripts/build-deb).
#define CURL_LIBRARY "libcurl.so.4"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *library;
static char load_error[1024];

static void open_library(void) {
    void *handle = dlopen(CURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(load_error, sizeof load_error, "cannot load " CURL_LIBRARY ": %s", dlerror());
    __atomic_store_n(&library, handle, __ATOMIC_RELEASE);
}

int ccurl_load(void) {
    pthread_once(&once, open_library);
    return library ? 1 : 0;
}

const char *ccurl_problem(void) {
    return ccurl_load() ? "cannot initialize libcurl" : load_error;
}

// Callers check ccurl_global_init (which loads the library) before anything else; a call
// without the library has no right answer, so it stops the process with the reason.
static void *symbol(const char *name) {
    if (!ccurl_load()) {
        fprintf(stderr, "lookupd: libcurl is needed and %s\n", load_error);
        exit(1);
    }
    void *f = dlsym(library, name);
    if (!f) {
        fprintf(stderr, "lookupd: " CURL_LIBRARY " lacks %s (libcurl older than 7.84?)\n", name);
        exit(1);
    }
    return f;
}

// One resolved pointer per function, looked up on its first call. Two threads racing on a
// first call both store the same value.
#define RESOLVE(type, name, var)                                                                \
    static __typeof__(type) var##_;                                                             \
    __typeof__(type) var = __atomic_load_n(&var##_, __ATOMIC_ACQUIRE);                          \
    if (!var) {                                                                                 \
        var = (__typeof__(type))symbol(name);                                                   \
        __atomic_store_n(&var##_, var, __ATOMIC_RELEASE);                                       \
    }

#define FORWARD(ret, name, params, args)                                                        \
    ret ccurl_##name params {                                                                   \
        RESOLVE(ret(*) params, "curl_" #name, f)                                                \
        return f args;                                                                          \
    }

#define FORWARD_VOID(name, params, args)                                                        \
    void ccurl_##name params {                                                                  \
        RESOLVE(void(*) params, "curl_" #name, f)                                               \
        f args;                                                                                 \
    }

CURLcode ccurl_global_init(long flags) {
    if (!ccurl_load()) return CURLE_FAILED_INIT;
    RESOLVE(CURLcode(*)(long), "curl_global_init", f)
    return f(flags);
}

FORWARD(CURL *, easy_init, (void), ())
FORWARD_VOID(easy_cleanup, (CURL *handle), (handle))
FORWARD_VOID(easy_reset, (CURL *handle), (handle))
FORWARD(CURLcode, easy_perform, (CURL *handle), (handle))
FORWARD(const char *, easy_strerror, (CURLcode code), (code))
FORWARD(struct curl_slist *, slist_append, (struct curl_slist *list, const char *text), (list, text))
FORWARD_VOID(slist_free_all, (struct curl_slist *list), (list))
FORWARD(CURLM *, multi_init, (void), ())
FORWARD(CURLMcode, multi_cleanup, (CURLM *multi), (multi))
FORWARD(CURLMcode, multi_add_handle, (CURLM *multi, CURL *handle), (multi, handle))
FORWARD(CURLMcode, multi_remove_handle, (CURLM *multi, CURL *handle), (multi, handle))
FORWARD(CURLMcode, multi_perform, (CURLM *multi, int *running), (multi, running))
FORWARD(CURLMcode, multi_poll, (CURLM *multi, struct curl_waitfd *extra, unsigned count, int timeout_ms, int *numfds),
        (multi, extra, count, timeout_ms, numfds))
FORWARD(CURLMcode, multi_wakeup, (CURLM *multi), (multi))
FORWARD(CURLMsg *, multi_info_read, (CURLM *multi, int *left), (multi, left))

// The variadic two, one typed entry per argument type.
typedef CURLcode (*setopt_function)(CURL *, CURLoption, ...);
typedef CURLcode (*getinfo_function)(CURL *, CURLINFO, ...);

CURLcode ccurl_set_long(CURL *handle, CURLoption option, long value) {
    RESOLVE(setopt_function, "curl_easy_setopt", f)
    return f(handle, option, value);
}

CURLcode ccurl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    RESOLVE(setopt_function, "curl_easy_setopt", f)
    return f(handle, option, value);
}

CURLcode ccurl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    RESOLVE(setopt_function, "curl_easy_setopt", f)
    return f(handle, option, value);
}

CURLcode ccurl_set_callback(CURL *handle, CURLoption option, ccurl_data_callback value) {
    RESOLVE(setopt_function, "curl_easy_setopt", f)
    return f(handle, option, value);
}

CURLcode ccurl_get_long(CURL *handle, CURLINFO info, long *value) {
    RESOLVE(getinfo_function, "curl_easy_getinfo", f)
    return f(handle, info, value);
}

CURLcode ccurl_get_string(CURL *handle, CURLINFO info, char **value) {
    RESOLVE(getinfo_function, "curl_easy_getinfo", f)
    return f(handle, info, value);
}
