/* The cost of GetILToNativeMapping from C on an opened image (cached: the store is built), and of
 * opening the image (uncached: parse the image and decode every body's map). Run by hand:
 *   gcc -O2 -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/bench_capi.c \
 *       -L target/release -lclrmap_capi -Wl,-rpath,$PWD/target/release -o /tmp/bench_capi
 *   /tmp/bench_capi .../System.Private.CoreLib.dll */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clrmap.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    ICorProfilerInfo *info = NULL;
    double t0 = now();
    if (clrmap_profiler_info_open(argv[1], &info) != CLRMAP_S_OK) return 1;
    double open_s = now() - t0;
    uint32_t n = 0;
    clrmap_profiler_info_function_ids(info, NULL, 0, &n);
    uint64_t *ids = malloc(n * sizeof *ids);
    clrmap_profiler_info_function_ids(info, ids, n, &n);
    COR_DEBUG_IL_TO_NATIVE_MAP map[512];
    const int rounds = 20;
    uint64_t calls = 0, entries = 0;
    t0 = now();
    for (int r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t got = 0;
            info->lpVtbl->GetILToNativeMapping(info, (uintptr_t)ids[i], 512, &got, map);
            entries += got;
            calls++;
        }
    }
    double per_call = (now() - t0) / calls;
    printf("open (parse + decode %u bodies): %.1f ms\n", n, open_s * 1e3);
    printf("GetILToNativeMapping, opened image: %.0f ns per call (%llu calls, %.1f entries per map)\n",
           per_call * 1e9, (unsigned long long)calls, (double)entries / calls);
    free(ids);
    info->lpVtbl->Release(info);
    return 0;
}
