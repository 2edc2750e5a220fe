/* The C ABI as a C user sees it: vtables, the two-call protocol, truncation, bad arguments and
 * reference counts down to zero. Usage: test_capi MAP RVA_COUNT RVA... IMAGE ADDRESS...
 * Prints each dictionary's types and each image body's map, for scripts/c-tests.sh to compare
 * with the CLI and with a live profiler capture. Exits 1 on any failed check. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmap.h"

_Static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping) == 35 * sizeof(void *), "slot 35");
_Static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping2) == 78 * sizeof(void *), "slot 78");
_Static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping3) == 91 * sizeof(void *), "slot 91");
_Static_assert(sizeof(ICorProfilerInfoVtbl) == 93 * sizeof(void *), "93 slots");
_Static_assert(offsetof(ICorDebugSymbolProvider2Vtbl, GetGenericDictionaryInfo) == 3 * sizeof(void *), "IDL slot 3");
_Static_assert(sizeof(COR_DEBUG_IL_TO_NATIVE_MAP) == 12, "12 bytes");

#include "check.h"

/* The IIDs as cordebug.idl and corprof.idl spell them, typed here independently of the header. */
static const GUID IDL_IUnknown = {0, 0, 0, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
static const GUID IDL_SymbolProvider2 = {0xF9801807, 0x4764, 0x4330, {0x9E, 0x67, 0x4F, 0x68, 0x50, 0x94, 0x16, 0x5E}};
static const GUID IDL_MemoryBuffer = {0x677888B3, 0xD160, 0x4B8C, {0xA7, 0x3B, 0xD7, 0x9E, 0x6A, 0xAA, 0x1D, 0x13}};
static const GUID IDL_ProfilerInfo = {0x28B5557D, 0x3F3F, 0x48b4, {0x90, 0xB2, 0x5F, 0x9E, 0xEA, 0x2F, 0x6C, 0x48}};
static const GUID IID_Other = {1, 2, 3, {4, 5, 6, 7, 8, 9, 10, 11}};

static int same_guid(const GUID *a, const GUID *b) { return memcmp(a, b, sizeof *a) == 0; }

static void test_iids(void) {
    CHECK(same_guid(&IID_IUnknown, &IDL_IUnknown));
    CHECK(same_guid(&IID_ICorDebugSymbolProvider2, &IDL_SymbolProvider2));
    CHECK(same_guid(&IID_ICorDebugMemoryBuffer, &IDL_MemoryBuffer));
    CHECK(same_guid(&IID_ICorProfilerInfo, &IDL_ProfilerInfo));
    CHECK(sizeof(GUID) == 16);
}

static void test_map(const char *path, int n, char **rvas) {
    ICorDebugSymbolProvider2 *p = NULL;
    CHECK(clrmap_symbol_provider_open(path, &p) == CLRMAP_S_OK && p);
    /* QueryInterface and reference counts. */
    void *q = NULL;
    CHECK(p->lpVtbl->QueryInterface(p, &IID_ICorDebugSymbolProvider2, &q) == CLRMAP_S_OK && q == p);
    CHECK(p->lpVtbl->QueryInterface(p, &IID_IUnknown, &q) == CLRMAP_S_OK && q == p);
    CHECK(p->lpVtbl->QueryInterface(p, &IID_ICorDebugMemoryBuffer, &q) == CLRMAP_E_NOINTERFACE && q == NULL);
    CHECK(p->lpVtbl->QueryInterface(p, &IID_Other, &q) == CLRMAP_E_NOINTERFACE && q == NULL);
    CHECK(p->lpVtbl->QueryInterface(p, &IID_Other, NULL) == CLRMAP_E_POINTER);
    CHECK(p->lpVtbl->Release(p) == 2);
    CHECK(p->lpVtbl->Release(p) == 1);
    uint32_t a, b;
    CHECK(p->lpVtbl->GetFrameProps(p, 0, &a, &b) == CLRMAP_E_NOTIMPL);
    /* The buffer: the file's bytes, alive after the provider is gone. */
    ICorDebugMemoryBuffer *buf = NULL;
    CHECK(p->lpVtbl->GetGenericDictionaryInfo(p, &buf) == CLRMAP_S_OK && buf);
    CHECK(p->lpVtbl->GetGenericDictionaryInfo(p, NULL) == CLRMAP_E_POINTER);
    CHECK(buf->lpVtbl->QueryInterface(buf, &IID_ICorDebugMemoryBuffer, &q) == CLRMAP_S_OK && q == buf);
    CHECK(buf->lpVtbl->AddRef(buf) == 3 && buf->lpVtbl->Release(buf) == 2 && buf->lpVtbl->Release(buf) == 1);
    /* Lookups through the two-call protocol. */
    for (int i = 0; i < n; i++) {
        uint32_t rva = (uint32_t)strtoul(rvas[i], NULL, 0), need = 0;
        CHECK(clrmap_dict_lookup(p, rva, NULL, 0, &need) == CLRMAP_S_FALSE && need > 1);
        char small[2];
        CHECK(clrmap_dict_lookup(p, rva, small, sizeof small, &need) == CLRMAP_S_FALSE);
        char *text = malloc(need);
        CHECK(clrmap_dict_lookup(p, rva, text, need, &need) == CLRMAP_S_OK && strlen(text) + 1 == need);
        printf("dict %s\n%s\n", rvas[i], text);
        free(text);
    }
    uint32_t need = 0;
    CHECK(clrmap_dict_lookup(p, 0xFFFFFFF0u, NULL, 0, &need) == CLRMAP_E_INVALIDARG);
    CHECK(p->lpVtbl->Release(p) == 0); /* the provider is freed; the buffer keeps the map */
    const void *start = NULL;
    uint32_t size = 0;
    CHECK(buf->lpVtbl->GetStartAddress(buf, &start) == CLRMAP_S_OK && start);
    CHECK(buf->lpVtbl->GetSize(buf, &size) == CLRMAP_S_OK);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        unsigned char *file = malloc(size + 1);
        size_t got = fread(file, 1, size + 1, f);
        fclose(f);
        CHECK(got == size && memcmp(file, start, size) == 0);
        free(file);
    }
    CHECK(buf->lpVtbl->Release(buf) == 0);
    /* Bad arguments and bad maps. */
    CHECK(clrmap_symbol_provider_open("/nonexistent/map", &p) == CLRMAP_E_FILE_NOT_FOUND);
    CHECK(clrmap_symbol_provider_open(path, NULL) == CLRMAP_E_POINTER);
    CHECK(clrmap_symbol_provider_from_memory(NULL, 0, &p) == CLRMAP_E_POINTER);
    const uint8_t bad[] = {0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0};
    CHECK(clrmap_symbol_provider_from_memory(bad, sizeof bad, &p) == CLRMAP_E_TRUNCATED_DIRECTORY);
    const uint8_t good[] = {2, 0, 0, 0x80, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 2, 1, 8};
    CHECK(clrmap_symbol_provider_from_memory(good, sizeof good, &p) == CLRMAP_S_OK);
    char text[32];
    CHECK(clrmap_dict_lookup(p, 0x2000, text, sizeof text, &need) == CLRMAP_S_OK && strcmp(text, "int32") == 0);
    CHECK(p->lpVtbl->Release(p) == 0);
}

/* The last error: each kind its HRESULT, with the kind's id, the location and the expectation. */
static int last_is(HRESULT hr, const char *kind, uint32_t location_kind, uint64_t location) {
    ClrmapError e;
    if (clrmap_last_error(&e) != CLRMAP_S_OK) return 0;
    if (e.hr != hr || e.location_kind != location_kind || e.location != location || !e.message || !e.expected) return 0;
    if (kind == NULL) return e.kind == NULL && e.family == NULL;
    return e.kind && e.family && strcmp(e.kind, kind) == 0 && strstr(e.message, kind) == e.message;
}

static void test_errors(const char *map_path) {
    ICorDebugSymbolProvider2 *p = NULL;
    ClrmapError e;
    CHECK(clrmap_last_error(NULL) == CLRMAP_E_POINTER);
    clrmap_clear_last_error();
    memset(&e, 0xAB, sizeof e);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_FALSE && e.hr == CLRMAP_S_OK && e.kind == NULL && e.message == NULL);
    /* A parse error: the directory of 0x7FFFFFFF entries does not fit. */
    const uint8_t bad[] = {0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0};
    CHECK(clrmap_symbol_provider_from_memory(bad, sizeof bad, &p) == CLRMAP_E_TRUNCATED_DIRECTORY);
    CHECK(last_is(CLRMAP_E_TRUNCATED_DIRECTORY, "truncated_directory", CLRMAP_LOCATION_OFFSET, 4));
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && strcmp(e.family, "parse") == 0 && e.expected[0] != 0);
    /* A signature error keeps the runtime's META_E_BAD_SIGNATURE: element type 0xFF at offset 22. */
    const uint8_t bad_type[] = {2, 0, 0, 0x80, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 2, 1, 0xFF};
    CHECK(clrmap_symbol_provider_from_memory(bad_type, sizeof bad_type, &p) == CLRMAP_META_E_BAD_SIGNATURE);
    CHECK(last_is(CLRMAP_META_E_BAD_SIGNATURE, "bad_element_type", CLRMAP_LOCATION_OFFSET, 22));
    /* A validity error: the sorted flag set over RVAs out of order. */
    const uint8_t unsorted[] = {2, 0, 0, 0x80, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 2, 1, 8};
    CHECK(clrmap_symbol_provider_from_memory(unsorted, sizeof unsorted, &p) == CLRMAP_E_UNSORTED);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && strcmp(e.kind, "unsorted") == 0 && strcmp(e.family, "validity") == 0);
    /* Successful calls leave the last error alone; clear forgets it. */
    const uint8_t good[] = {2, 0, 0, 0x80, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 2, 1, 8};
    CHECK(clrmap_symbol_provider_from_memory(good, sizeof good, &p) == CLRMAP_S_OK);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && e.hr == CLRMAP_E_UNSORTED);
    /* A look-up that finds nothing: the runtime's E_INVALIDARG, the kind not_found at the RVA. */
    uint32_t need = 0;
    CHECK(clrmap_dict_lookup(p, 0x1234, NULL, 0, &need) == CLRMAP_E_INVALIDARG);
    CHECK(last_is(CLRMAP_E_INVALIDARG, "not_found", CLRMAP_LOCATION_RVA, 0x1234));
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && strcmp(e.family, "resolve") == 0);
    /* Failures that are no library error: NULL kind, a message. */
    CHECK(clrmap_dict_lookup(p, 0x1000, NULL, 0, NULL) == CLRMAP_E_POINTER);
    CHECK(last_is(CLRMAP_E_POINTER, NULL, CLRMAP_LOCATION_NOWHERE, 0));
    void *q = NULL;
    CHECK(p->lpVtbl->QueryInterface(p, &IID_ICorProfilerInfo, &q) == CLRMAP_E_NOINTERFACE);
    CHECK(last_is(CLRMAP_E_NOINTERFACE, NULL, CLRMAP_LOCATION_NOWHERE, 0));
    CHECK(p->lpVtbl->Release(p) == 0);
    CHECK(clrmap_symbol_provider_open("/nonexistent/map", &p) == CLRMAP_E_FILE_NOT_FOUND);
    CHECK(last_is(CLRMAP_E_FILE_NOT_FOUND, NULL, CLRMAP_LOCATION_NOWHERE, 0));
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && strstr(e.message, "/nonexistent/map") != NULL);
    CHECK(clrmap_symbol_provider_open(".", &p) == CLRMAP_E_BAD_FILE_TYPE);
    /* A dictionary map is no image: bad_image, and the profiler-info and symbolizer opens agree. */
    CHECK(clrmap_symbol_provider_open_image(map_path, &p) == CLRMAP_E_BAD_IMAGE);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && strcmp(e.kind, "bad_image") == 0 && e.location_kind == CLRMAP_LOCATION_OFFSET);
    ICorProfilerInfo *info = NULL;
    CHECK(clrmap_profiler_info_open(map_path, &info) == CLRMAP_E_UNRECOGNIZED_FILE && info == NULL);
    CHECK(last_is(CLRMAP_E_UNRECOGNIZED_FILE, NULL, CLRMAP_LOCATION_NOWHERE, 0));
    clrmap_clear_last_error();
    CHECK(clrmap_last_error(&e) == CLRMAP_S_FALSE);
}

/* An error inside a PDB embedded in an image is located in the inflated PDB, not in the image.
 * scripts/c-tests.sh makes the image (CLRMAP_TEST_INFLATED_IMAGE): CoreLib with its CodeView entry
 * turned into an embedded PDB whose 32-byte metadata root declares a stream header it lacks. */
static void test_inflated(const char *image) {
    ClrmapSymbolizer *sym = NULL;
    ClrmapError e;
    CHECK(clrmap_symbolizer_open(image, NULL, NULL, 0, &sym) == CLRMAP_E_BAD_PDB && sym == NULL);
    CHECK(clrmap_last_error(&e) == CLRMAP_S_OK && e.hr == CLRMAP_E_BAD_PDB && e.kind && strcmp(e.kind, "bad_pdb") == 0);
    CHECK(e.location_kind == CLRMAP_LOCATION_INFLATED && e.location == 32);
    CHECK(e.message && strstr(e.message, "bad_pdb at offset 32 of the embedded PDB, inflated") != NULL);
    clrmap_clear_last_error();
}

/* GetFrameProps over a ReadyToRun image: every body's map entries probed; in a funclet the parent
 * is the body's start, in the main body there is none. */
static void test_frames(const char *image) {
    ICorDebugSymbolProvider2 *p = NULL;
    ICorProfilerInfo *info = NULL;
    CHECK(clrmap_symbol_provider_open_image(image, &p) == CLRMAP_S_OK && p);
    CHECK(clrmap_profiler_info_open(image, &info) == CLRMAP_S_OK && info);
    if (!p || !info) return;
    uint32_t count = 0, start = 1, parent = 1;
    CHECK(clrmap_profiler_info_function_ids(info, NULL, 0, &count) == CLRMAP_S_FALSE && count > 1000);
    uint64_t *ids = malloc(count * sizeof *ids);
    CHECK(clrmap_profiler_info_function_ids(info, ids, count, &count) == CLRMAP_S_OK);
    uint32_t funclets = 0, probes = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t fid = (uint32_t)ids[i], total = 0;
        CHECK(p->lpVtbl->GetFrameProps(p, fid, &start, &parent) == CLRMAP_S_OK && start == fid && parent == 0);
        CHECK(info->lpVtbl->GetILToNativeMapping(info, fid, 0, &total, NULL) == CLRMAP_S_OK);
        COR_DEBUG_IL_TO_NATIVE_MAP *map = calloc(total + 1, sizeof *map);
        CHECK(info->lpVtbl->GetILToNativeMapping(info, fid, total, &total, map) == CLRMAP_S_OK);
        uint32_t last_start = 0;
        for (uint32_t j = 0; j < total; j++) {
            uint32_t rva = fid + map[j].nativeStartOffset;
            if (map[j].nativeStartOffset == map[j].nativeEndOffset) continue;
            CHECK(p->lpVtbl->GetFrameProps(p, rva, &start, &parent) == CLRMAP_S_OK);
            probes++;
            CHECK(start <= rva && start >= fid);
            if (parent != 0) {
                CHECK(parent == fid && start > fid);
                if (start != last_start) funclets++;
                last_start = start;
            } else {
                CHECK(start == fid);
            }
        }
        free(map);
    }
    free(ids);
    printf("frames: %u probes, %u funclets\n", probes, funclets);
    CHECK(funclets > 100);
    /* In no method: E_INVALIDARG, both outs 0, not_found at the RVA. */
    start = parent = 7;
    CHECK(p->lpVtbl->GetFrameProps(p, 0, &start, &parent) == CLRMAP_E_INVALIDARG && start == 0 && parent == 0);
    CHECK(last_is(CLRMAP_E_INVALIDARG, "not_found", CLRMAP_LOCATION_RVA, 0));
    CHECK(p->lpVtbl->GetFrameProps(p, 0xFFFFFFFFu, &start, &parent) == CLRMAP_E_INVALIDARG);
    CHECK(p->lpVtbl->GetFrameProps(p, 0x1000, NULL, &parent) == CLRMAP_E_POINTER);
    /* An image provider has no dictionary map. */
    ICorDebugMemoryBuffer *buf = NULL;
    CHECK(p->lpVtbl->GetGenericDictionaryInfo(p, &buf) == CLRMAP_E_NOTIMPL && buf == NULL);
    uint32_t need = 0;
    CHECK(clrmap_dict_lookup(p, 0x1000, NULL, 0, &need) == CLRMAP_E_NOTIMPL);
    void *q = NULL;
    CHECK(p->lpVtbl->QueryInterface(p, &IID_ICorDebugSymbolProvider2, &q) == CLRMAP_S_OK && q == p);
    CHECK(p->lpVtbl->Release(p) == 1 && p->lpVtbl->Release(p) == 0);
    CHECK(info->lpVtbl->Release(info) == 0);
}

static void test_image(const char *path, int n, char **addresses) {
    ICorProfilerInfo *info = NULL;
    CHECK(clrmap_profiler_info_open(path, &info) == CLRMAP_S_OK && info);
    uint32_t count = 0;
    CHECK(clrmap_profiler_info_function_ids(info, NULL, 0, &count) == CLRMAP_S_FALSE && count > 1000);
    uint64_t *ids = malloc(count * sizeof *ids);
    CHECK(clrmap_profiler_info_function_ids(info, ids, count, &count) == CLRMAP_S_OK);
    free(ids);
    for (int i = 0; i < n; i++) {
        uintptr_t fid = (uintptr_t)strtoull(addresses[i], NULL, 0);
        uint32_t total = 0, got = 0;
        CHECK(info->lpVtbl->GetILToNativeMapping(info, fid, 0, &total, NULL) == CLRMAP_S_OK && total > 0);
        COR_DEBUG_IL_TO_NATIVE_MAP *map = calloc(total + 1, sizeof *map);
        /* Truncation: S_OK, the full count, and nothing written past cMap. */
        map[1].ilOffset = 0xABCDEF;
        CHECK(info->lpVtbl->GetILToNativeMapping(info, fid, 1, &got, map) == CLRMAP_S_OK && got == total);
        CHECK(total < 2 || map[1].ilOffset == 0xABCDEF);
        CHECK(info->lpVtbl->GetILToNativeMapping(info, fid, total, &got, map) == CLRMAP_S_OK && got == total);
        COR_DEBUG_IL_TO_NATIVE_MAP *map3 = calloc(total, sizeof *map3);
        CHECK(info->lpVtbl->GetILToNativeMapping3(info, fid, total, &got, map3) == CLRMAP_S_OK && got == total);
        CHECK(memcmp(map, map3, total * sizeof *map) == 0);
        CHECK(info->lpVtbl->GetILToNativeMapping2(info, fid, 7, total, &got, map3) == CLRMAP_S_OK && got == total);
        printf("map %s", addresses[i]);
        for (uint32_t j = 0; j < total; j++) printf(" %u,%u,%u", map[j].ilOffset, map[j].nativeStartOffset, map[j].nativeEndOffset);
        printf("\n");
        uint64_t sym_fid = 0;
        uint32_t il = 0;
        CHECK(clrmap_profiler_info_symbolize(info, fid, &sym_fid, &il) == CLRMAP_S_OK && sym_fid == fid);
        free(map);
        free(map3);
    }
    /* The runtime's E_INVALIDARG cases. */
    uint32_t got = 0;
    COR_DEBUG_IL_TO_NATIVE_MAP one;
    CHECK(info->lpVtbl->GetILToNativeMapping(info, 0, 0, &got, NULL) == CLRMAP_E_INVALIDARG);
    CHECK(info->lpVtbl->GetILToNativeMapping(info, 1, 1, NULL, &one) == CLRMAP_E_INVALIDARG);
    CHECK(info->lpVtbl->GetILToNativeMapping(info, 1, 1, &got, NULL) == CLRMAP_E_INVALIDARG);
    CHECK(info->lpVtbl->GetILToNativeMapping3(info, 0, 0, &got, NULL) == CLRMAP_E_INVALIDARG);
    void *any = NULL;
    CHECK(info->lpVtbl->QueryInterface(info, &IID_Other, &any) == CLRMAP_E_NOINTERFACE);
    CHECK(info->lpVtbl->QueryInterface(info, &IID_ICorProfilerInfo, &any) == CLRMAP_S_OK && any == info);
    CHECK(info->lpVtbl->Release(info) == 1);
    /* Every slot clrmap does not serve answers E_NOTIMPL. */
    CHECK(info->lpVtbl->reserved_3_34[0](info) == CLRMAP_E_NOTIMPL);
    CHECK(info->lpVtbl->reserved_36_77[41](info) == CLRMAP_E_NOTIMPL);
    CHECK(info->lpVtbl->reserved_92[0](info) == CLRMAP_E_NOTIMPL);
    CHECK(info->lpVtbl->Release(info) == 0);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_capi MAP N RVA... IMAGE ADDRESS...\n");
        return 2;
    }
    int n = atoi(argv[2]);
    test_iids();
    test_map(argv[1], n, argv + 3);
    test_errors(argv[1]);
    const char *inflated = getenv("CLRMAP_TEST_INFLATED_IMAGE");
    if (inflated) {
        test_inflated(inflated);
        fprintf(stderr, "c-tests: an error in an embedded PDB is located in the inflated PDB\n");
    }
    if (argc > 3 + n) {
        test_image(argv[3 + n], argc - 4 - n, argv + 4 + n);
        test_frames(argv[3 + n]);
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "c-tests: all checks passed\n");
    return 0;
}
