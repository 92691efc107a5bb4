#ifndef LOOKUPD_CFUZZER_H
#define LOOKUPD_CFUZZER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's entry for programs that keep their own main(): lookupd-fuzz
// picks the target from its first argument, then hands the rest of the
// command line to libFuzzer. Defined in libclang_rt.fuzzer_no_main, which
// scripts/fuzz links only when building with -DLOOKUPD_FUZZER.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

// An unnamed in-memory file for the directory target (Glibc's Swift module
// does not export memfd_create).
int lookupd_fuzz_memfd(void);

#endif
