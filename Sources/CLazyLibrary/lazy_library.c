#include "lazy_library.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int load_locked(farcast_lazy_library *group) {
    if (group->loaded) return 0;
    for (int i = 0; i < group->library_count; i++) {
        if (group->libraries[i] == NULL &&
            (group->libraries[i] = dlopen(group->library_names[i], RTLD_NOW | RTLD_GLOBAL)) == NULL) {
            snprintf(group->failure, sizeof group->failure, "%s", dlerror());
            return -1;
        }
    }
    for (int s = 0; s < group->symbol_count; s++) {
        void *found = NULL;
        for (int i = 0; i < group->library_count && found == NULL; i++) found = dlsym(group->libraries[i], group->symbol_names[s]);
        if (found == NULL) {  // "libA.so.1 or libB.so.2 has no f (too old a version?)"
            size_t used = 0;
            for (int i = 0; i < group->library_count && used < sizeof group->failure; i++)
                used += (size_t)snprintf(group->failure + used, sizeof group->failure - used, "%s%s",
                                         i ? " or " : "", group->library_names[i]);
            if (used < sizeof group->failure)
                snprintf(group->failure + used, sizeof group->failure - used, " has no %s (too old a version?)",
                         group->symbol_names[s]);
            return -1;
        }
        group->symbols[s] = found;
    }
    group->loaded = 1;
    return 0;
}

const char *farcast_lazy_load(farcast_lazy_library *group) {
    pthread_mutex_lock(&group->lock);
    int status = group->failed ? -1 : load_locked(group);
    if (status != 0) group->failed = 1;
    pthread_mutex_unlock(&group->lock);
    return status == 0 ? NULL : group->failure;
}

void farcast_lazy_require(farcast_lazy_library *group) {
    const char *problem = farcast_lazy_load(group);
    if (problem != NULL) {
        fprintf(stderr, "farcast: %s could not be loaded: %s\n", group->what, problem);
        abort();
    }
}
