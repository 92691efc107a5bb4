#define _GNU_SOURCE
#include <sys/mman.h>

#include "CFuzzer.h"

int lookupd_fuzz_memfd(void) {
    return memfd_create("lookupd-fuzz", MFD_CLOEXEC);
}
