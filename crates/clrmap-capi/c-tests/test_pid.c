/* A running .NET process through the C ABI: clrmap_profiler_info_open_pid and
 * clrmap_symbolizer_open_pid take a rundown snapshot through its diagnostics port, behind the same
 * objects a file gets; the error HRESULTs of a missing process and of a process that is not .NET.
 *
 *   test_pid PID CAPTURE MISSING_PID
 *
 * CAPTURE is what the clrmap profiler, loaded in PID at launch, recorded: GetILToNativeMapping3's
 * answer for each body the runtime jitted, with its FunctionID and code start. It is read after the
 * snapshot, when it holds every body the snapshot can have. For each FunctionID of the snapshot
 * (clrmap_profiler_info_function_ids) and each code start the profiler recorded for it, this
 * prints what GetILToNativeMapping3(start), called through the vtable, answers:
 *   "map FID START IL,FROM,TO ..."     S_OK and the whole map
 *   "absent FID START"                 E_INVALIDARG: a code start of the method not in the snapshot
 *   "unseen FID"                       the profiler recorded no body of this FunctionID
 * then "frame ADDRESS flags token il module method" for one address of the program's own code,
 * symbolized through clrmap_symbolizer_open_pid (the leaf rule). scripts/c-tests.sh compares the
 * maps with the capture and the frame with `clrmap symbolize --pid`. Run under valgrind. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clrmap.h"

#include "check.h"

#define TIMEOUT_MS 30000u

struct body {
    uint64_t fid, start;
};

/* The unsigned integer after `"key":` in a JSON line, or 0 when the key is absent. */
static uint64_t field(const char *line, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(line, pattern);
    return p ? strtoull(p + strlen(pattern), NULL, 10) : 0;
}

/* The (FunctionID, code start) of every jitted body in a capture. */
static struct body *read_capture(const char *path, size_t *n) {
    FILE *f = fopen(path, "r");
    *n = 0;
    if (!f) return NULL;
    size_t cap = 1024;
    struct body *all = malloc(cap * sizeof *all);
    char *line = NULL;
    size_t len = 0;
    while (all && getline(&line, &len, f) > 0) {
        if (!strstr(line, "\"kind\":\"jit\"")) continue;
        if (*n == cap) {
            cap *= 2;
            struct body *grown = realloc(all, cap * sizeof *all);
            if (!grown) break;
            all = grown;
        }
        all[*n].fid = field(line, "function_id");
        all[*n].start = field(line, "start");
        (*n)++;
    }
    free(line);
    fclose(f);
    return all;
}

/* GetILToNativeMapping3(start) through the vtable, by the two-call protocol; prints the answer. */
static int print_map3(ICorProfilerInfo *info, uint64_t fid, uint64_t start) {
    uint32_t need = 0;
    HRESULT hr = info->lpVtbl->GetILToNativeMapping3(info, (uintptr_t)start, 0, &need, NULL);
    if (hr == CLRMAP_E_INVALIDARG) {
        printf("absent %" PRIu64 " %" PRIu64 "\n", fid, start);
        return 0;
    }
    CHECK(hr == CLRMAP_S_OK && need > 0);
    COR_DEBUG_IL_TO_NATIVE_MAP *map = calloc(need ? need : 1, sizeof *map);
    uint32_t got = 0;
    CHECK(map && info->lpVtbl->GetILToNativeMapping3(info, (uintptr_t)start, need, &got, map) == CLRMAP_S_OK && got == need);
    printf("map %" PRIu64 " %" PRIu64, fid, start);
    for (uint32_t i = 0; map && i < got; i++) printf(" %" PRIu32 ",%" PRIu32 ",%" PRIu32, map[i].ilOffset, map[i].nativeStartOffset, map[i].nativeEndOffset);
    printf("\n");
    free(map);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_pid PID CAPTURE MISSING_PID\n");
        return 2;
    }
    uint32_t pid = (uint32_t)strtoul(argv[1], NULL, 10);
    uint32_t missing = (uint32_t)strtoul(argv[3], NULL, 10);

    /* The profiler-info object over a snapshot. */
    ICorProfilerInfo *info = NULL;
    HRESULT hr = clrmap_profiler_info_open_pid(pid, TIMEOUT_MS, &info);
    if (hr != CLRMAP_S_OK) {
        ClrmapError e;
        clrmap_last_error(&e);
        fprintf(stderr, "test_pid: cannot open process %" PRIu32 ": %s (HRESULT 0x%08" PRIX32 ")\n", pid, e.message ? e.message : "", (uint32_t)hr);
        return 1;
    }
    uint32_t count = 0;
    CHECK(clrmap_profiler_info_function_ids(info, NULL, 0, &count) == CLRMAP_S_FALSE && count > 0);
    uint64_t *ids = calloc(count ? count : 1, sizeof *ids);
    CHECK(ids && clrmap_profiler_info_function_ids(info, ids, count, &count) == CLRMAP_S_OK);

    size_t nbodies = 0;
    struct body *bodies = read_capture(argv[2], &nbodies);
    CHECK(bodies && nbodies > 0);
    uint64_t some_start = 0;
    int maps = 0;
    for (uint32_t i = 0; ids && bodies && i < count; i++) {
        int asked = 0;
        for (size_t j = 0; j < nbodies; j++) {
            if (bodies[j].fid != ids[i]) continue;
            int dup = 0;
            for (size_t k = 0; k < j; k++) dup |= bodies[k].fid == ids[i] && bodies[k].start == bodies[j].start;
            if (dup) continue;
            asked++;
            if (print_map3(info, ids[i], bodies[j].start)) {
                maps++;
                if (!some_start) some_start = bodies[j].start;
            }
        }
        if (!asked) printf("unseen %" PRIu64 "\n", ids[i]);
        /* The FunctionID's first body, by slot 35. */
        uint32_t n = 0;
        CHECK(info->lpVtbl->GetILToNativeMapping(info, (FunctionID)ids[i], 0, &n, NULL) == CLRMAP_S_OK);
    }
    CHECK(maps > 0);
    CHECK(info->lpVtbl->GetILToNativeMapping3(info, 0x10, 0, &count, NULL) == CLRMAP_E_INVALIDARG);
    uint64_t fid = 0;
    uint32_t il = 0;
    CHECK(clrmap_profiler_info_symbolize(info, some_start + 1, &fid, &il) == CLRMAP_S_OK && fid != 0);
    CHECK(info->lpVtbl->Release(info) == 0);

    /* The symbolizer over a new snapshot: every body of the capture that it has symbolizes to a
     * method; one of the program's own is printed. */
    ClrmapSymbolizer *sym = NULL;
    CHECK(clrmap_symbolizer_open_pid(pid, 0, NULL, NULL, 0, &sym) == CLRMAP_S_OK && sym);
    int printed = 0;
    for (size_t j = 0; sym && bodies && j < nbodies && !printed; j++) {
        ClrmapFrame f;
        uint64_t address = bodies[j].start + 1;
        if (clrmap_symbolizer_symbolize(sym, address, CLRMAP_FRAME_LEAF, &f) != CLRMAP_S_OK) continue;
        CHECK((f.flags & CLRMAP_FRAME_METHOD) && f.method && f.module);
        if (f.module && strcmp(f.module, "Attach.dll") == 0) {
            printf("frame %" PRIu64 "\t%" PRIu32 "\t%" PRIu32 "\t%" PRIu32 "\t%s\t%s\n", address, f.flags, f.token, f.il_offset, f.module, f.method);
            printed = 1;
        }
    }
    CHECK(printed);
    clrmap_symbolizer_release(sym);
    free(bodies);
    free(ids);

    /* A pid no process has, and a process that is not .NET (this one): their own HRESULTs and a
     * last error that names the kind. */
    ClrmapError e;
    info = NULL;
    CHECK(clrmap_profiler_info_open_pid(missing, 1000, &info) == CLRMAP_E_NO_SUCH_PROCESS && info == NULL);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && e.hr == CLRMAP_E_NO_SUCH_PROCESS && e.kind == NULL && e.location_kind == CLRMAP_LOCATION_NOWHERE);
    CHECK(e.message && strstr(e.message, "no_such_process") != NULL);
    printf("missing %s\n", e.message ? e.message : "");
    sym = NULL;
    CHECK(clrmap_symbolizer_open_pid(missing, 1000, NULL, NULL, 0, &sym) == CLRMAP_E_NO_SUCH_PROCESS && sym == NULL);
    CHECK(clrmap_profiler_info_open_pid((uint32_t)getpid(), 1000, &info) == CLRMAP_E_NOT_DOTNET && info == NULL);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && e.message && strstr(e.message, "not_dotnet") != NULL);
    printf("self %s\n", e.message ? e.message : "");
    CHECK(clrmap_symbolizer_open_pid((uint32_t)getpid(), 1000, NULL, NULL, 0, &sym) == CLRMAP_E_NOT_DOTNET && sym == NULL);

    /* NULL arguments. */
    CHECK(clrmap_profiler_info_open_pid(pid, 0, NULL) == CLRMAP_E_POINTER);
    CHECK(clrmap_symbolizer_open_pid(pid, 0, NULL, NULL, 1, &sym) == CLRMAP_E_POINTER && sym == NULL);
    CHECK(clrmap_symbolizer_open_pid(pid, 0, NULL, NULL, 0, NULL) == CLRMAP_E_POINTER);

    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "c-tests: pid checks passed\n");
    return 0;
}
