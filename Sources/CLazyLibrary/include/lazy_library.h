// Opening a group of shared libraries with dlopen on first use and resolving the symbols the
// generated loaders forward to (Sources/C*Loader/loader.c, written by scripts/gen/lazy_loaders.py).
#pragma once
#include <pthread.h>

/// One group of libraries and the symbols resolved from them. A generated loader defines one
/// statically; only these two functions touch it.
typedef struct farcast_lazy_library {
    const char *what;                  // named in the message of a failed load: "SDL2"
    int library_count;
    const char *const *library_names;  // sonames, opened in this order
    void **libraries;                  // their handles
    int symbol_count;
    const char *const *symbol_names;
    void **symbols;                    // the resolved addresses, NULL until loaded
    pthread_mutex_t lock;
    int loaded, failed;                // a failure is final: `failure` is written once, then only read
    char failure[512];
} farcast_lazy_library;

/// Opens the libraries and resolves every symbol at once. NULL when ready (also on every later
/// call); otherwise why not: a library is missing, or lacks a symbol. Thread-safe.
const char *farcast_lazy_load(farcast_lazy_library *group);

/// For a forwarder called before a successful load: loads now, or ends the process with the
/// reason on stderr. Callers load first and report a failure as a typed error; this is the
/// safety net.
void farcast_lazy_require(farcast_lazy_library *group);
