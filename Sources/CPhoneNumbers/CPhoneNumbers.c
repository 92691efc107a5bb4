// See include/CPhoneNumbers.h. The executable's half: every call goes to
// liblookupd-phonenumbers.so (Sources/PhoneNumbersBridge), opened with dlopen the first time
// any process asks for libphonenumber's data. Linking the library directly made every lookupd
// process, `lookupd --help` included, map and relocate libphonenumber, libgeocoding (17 MB of
// pointer tables), protobuf, ICU and a dozen abseil objects before main: most of a short
// command's CPU (docs/BENCHMARKS.md "Start-up").
#include "CPhoneNumbers.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BRIDGE_NAME "liblookupd-phonenumbers.so"

static pthread_once_t bridge_once = PTHREAD_ONCE_INIT;
static pthread_once_t path_once = PTHREAD_ONCE_INIT;
static void *bridge;
static char bridge_path[PATH_MAX];
static char bridge_error[PATH_MAX * 3];

// Beside the executable (a build folder: .build/release/, or the test bundle's folder), then
// ../lib/lookupd/ from it (the package: /usr/bin/lookupd, /usr/lib/lookupd/).
static void find_bridge(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(bridge_error, sizeof bridge_error, "cannot find " BRIDGE_NAME ": /proc/self/exe unreadable");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    const char *candidates[] = {"/" BRIDGE_NAME, "/../lib/lookupd/" BRIDGE_NAME};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s%s", exe, candidates[i]) >= (int)sizeof path) continue;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (!realpath(path, bridge_path)) snprintf(bridge_path, sizeof bridge_path, "%s", path);
            return;
        }
    }
    snprintf(bridge_error, sizeof bridge_error, "cannot find " BRIDGE_NAME " in %s or %s/../lib/lookupd", exe, exe);
}

const char *lookupd_pn_bridge_path(void) {
    pthread_once(&path_once, find_bridge);
    return bridge_path[0] ? bridge_path : NULL;
}

static void open_bridge(void) {
    if (!lookupd_pn_bridge_path()) return;
    void *handle = dlopen(bridge_path, RTLD_NOW | RTLD_LOCAL);
    __atomic_store_n(&bridge, handle, __ATOMIC_RELEASE);
    if (!handle) snprintf(bridge_error, sizeof bridge_error, "cannot load %s: %s", bridge_path, dlerror());
}

int lookupd_pn_load(void) {
    pthread_once(&bridge_once, open_bridge);
    return bridge ? 1 : 0;
}

const char *lookupd_pn_load_error(void) {
    return lookupd_pn_load() ? "" : bridge_error;
}

int lookupd_pn_is_loaded(void) {
    return __atomic_load_n(&bridge, __ATOMIC_ACQUIRE) != NULL;
}

// Without libphonenumber nothing numbering-related can be answered right, and an answer from
// no data would be silently wrong: stop with the reason.
static void *symbol(const char *name) {
    if (!lookupd_pn_load()) {
        fprintf(stderr, "lookupd: libphonenumber is needed and %s\n", bridge_error);
        exit(1);
    }
    void *f = dlsym(bridge, name);
    if (!f) {
        fprintf(stderr, "lookupd: %s lacks %s (built from another lookupd?)\n", bridge_path, name);
        exit(1);
    }
    return f;
}

// One resolved pointer per function, looked up on its first call. Two threads racing on a
// first call both store the same value.
#define FORWARD(ret, name, params, args)                                                        \
    ret lookupd_pn_##name params {                                                              \
        static ret(*resolved_) params;                                                          \
        __typeof__(resolved_) g_ = __atomic_load_n(&resolved_, __ATOMIC_ACQUIRE);               \
        if (!g_) {                                                                              \
            g_ = (__typeof__(resolved_))symbol("lookupd_pnb_" #name);                           \
            __atomic_store_n(&resolved_, g_, __ATOMIC_RELEASE);                                 \
        }                                                                                       \
        return g_ args;                                                                         \
    }

FORWARD(const uint8_t *, metadata_bytes, (size_t *size), (size))
FORWARD(int, metadata_ok, (void), ())
FORWARD(const char *, library_path, (void), ())
FORWARD(int, territory_count, (void), ())
FORWARD(const char *, territory_text, (int t, int field), (t, field))
FORWARD(int, territory_country_code, (int t), (t))
FORWARD(int, territory_flags, (int t), (t))
FORWARD(const char *, desc_pattern, (int t, int desc), (t, desc))
FORWARD(const char *, desc_example, (int t, int desc), (t, desc))
FORWARD(int, desc_lengths, (int t, int desc, int local_only, int32_t *out, int capacity), (t, desc, local_only, out, capacity))
FORWARD(int, mobile_is_geographical, (int cc), (cc))
FORWARD(int, geo_file_count, (void), ())
FORWARD(const char *, geo_file_name, (int f), (f))
FORWARD(int, geo_entry_count, (int f), (f))
FORWARD(const int32_t *, geo_prefixes, (int f), (f))
FORWARD(const char *const *, geo_descriptions, (int f), (f))
FORWARD(int, geo_lengths, (int f, int32_t *out, int capacity), (f, out, capacity))
FORWARD(int, region_name, (const char *region, const char *language, char *out, int capacity),
        (region, language, out, capacity))
FORWARD(int, reference_parse,
        (const char *text, const char *region, char *e164, int capacity, int *valid, int *possible),
        (text, region, e164, capacity, valid, possible))
FORWARD(int, reference_format, (const char *e164, int format, const char *region, char *out, int capacity),
        (e164, format, region, out, capacity))
FORWARD(int, reference_description, (const char *e164, const char *language, char *out, int capacity),
        (e164, language, out, capacity))
FORWARD(int, reference_region, (const char *e164, char *out, int capacity), (e164, out, capacity))
FORWARD(int, reference_type, (const char *e164), (e164))
FORWARD(int, reference_regions_for_code, (int cc, int *territories, int capacity), (cc, territories, capacity))
