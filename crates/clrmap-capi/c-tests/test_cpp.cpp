// The header from C++11: every macro, constant, IID, type and function of clrmap.h is used here
// (scripts/c-tests.sh checks that each name the header declares appears in this file), the cheap
// functions are called, and every function's address is taken. Run under valgrind.
//
//   test_cpp MAP    (a dictionary map holding RVA 0x1000: int32)
#include "clrmap.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check.h"

// The IIDs are objects: their addresses are constant expressions, in C++ as in C.
static const GUID *const iids[] = {&IID_IUnknown, &IID_ICorDebugMemoryBuffer, &IID_ICorDebugSymbolProvider2, &IID_ICorProfilerInfo};

// Every constant, as the type C++ sees.
static const HRESULT hresults[] = {
    CLRMAP_S_OK, CLRMAP_S_FALSE, CLRMAP_E_NOTIMPL, CLRMAP_E_NOINTERFACE, CLRMAP_E_POINTER, CLRMAP_E_FAIL,
    CLRMAP_E_INVALIDARG, CLRMAP_E_FILE_NOT_FOUND, CLRMAP_E_BAD_FILE_TYPE, CLRMAP_E_PDB_MISMATCH,
    CLRMAP_META_E_BAD_SIGNATURE, CLRMAP_E_TRUNCATED, CLRMAP_E_TRUNCATED_HEADER, CLRMAP_E_TRUNCATED_DIRECTORY,
    CLRMAP_E_OFFSET_OUT_OF_HEAP, CLRMAP_E_TRUNCATED_ITEM, CLRMAP_E_ITEM_LENGTH_MISMATCH, CLRMAP_E_TOO_DEEP,
    CLRMAP_E_UNSORTED, CLRMAP_E_DUPLICATE_RVA, CLRMAP_E_BAD_IMAGE, CLRMAP_E_BAD_METADATA, CLRMAP_E_BAD_READY_TO_RUN,
    CLRMAP_E_UNSUPPORTED_VERSION, CLRMAP_E_UNSUPPORTED_MACHINE, CLRMAP_E_BAD_DEBUG_INFO, CLRMAP_E_BAD_TRACE,
    CLRMAP_E_BAD_CAPTURE, CLRMAP_E_BAD_PDB, CLRMAP_E_UNSUPPORTED_PDB, CLRMAP_E_NOT_FOUND, CLRMAP_E_OUT_OF_RANGE,
    CLRMAP_E_BAD_NOTATION, CLRMAP_E_UNRECOGNIZED_FILE, CLRMAP_E_NO_SUCH_PROCESS, CLRMAP_E_NOT_DOTNET,
    CLRMAP_E_PERMISSION_DENIED, CLRMAP_E_UNSUPPORTED_COMMAND, CLRMAP_E_SERVER_ERROR, CLRMAP_E_PROTOCOL, CLRMAP_E_TIMEOUT,
    CLRMAP_E_BAD_ARGUMENT, CLRMAP_E_IO, CLRMAP_E_TARGET_EXITED, CLRMAP_E_UNSUPPORTED_PDB_FORMAT,
};
static const uint32_t flags[] = {
    CLRMAP_LOCATION_NOWHERE, CLRMAP_LOCATION_OFFSET, CLRMAP_LOCATION_RVA, CLRMAP_LOCATION_ADDRESS, CLRMAP_LOCATION_INFLATED,
    CLRMAP_FRAME_METHOD, CLRMAP_FRAME_LINE, CLRMAP_FRAME_LEAF, CLRMAP_FRAME_RETURN_ADDRESS, CLRMAP_FRAME_RETURN_ADDRESS_CLR31,
    CLRMAP_FRAME_IL_OFFSET,
};

static_assert(sizeof(GUID) == 16, "GUID");
static_assert(sizeof(COR_DEBUG_IL_TO_NATIVE_MAP) == 12, "COR_DEBUG_IL_TO_NATIVE_MAP");
static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping) == 35 * sizeof(void *), "slot 35");
static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping2) == 78 * sizeof(void *), "slot 78");
static_assert(offsetof(ICorProfilerInfoVtbl, GetILToNativeMapping3) == 91 * sizeof(void *), "slot 91");
static_assert(sizeof(ICorProfilerInfoVtbl) == 93 * sizeof(void *), "93 slots");
static_assert(offsetof(ICorDebugSymbolProvider2Vtbl, GetFrameProps) == 4 * sizeof(void *), "IDL slot 4");
static_assert(sizeof(ICorDebugMemoryBufferVtbl) == 5 * sizeof(void *), "5 slots");
static_assert(sizeof(FunctionID) == sizeof(void *) && sizeof(ReJITID) == sizeof(void *), "pointer-sized ids");
static_assert(CLRMAP_E_NOTIMPL < 0 && CLRMAP_E_UNRECOGNIZED_FILE < 0, "failure HRESULTs are negative");

// Every function's address, typed.
struct Exports {
    HRESULT (*last_error)(ClrmapError *);
    void (*clear_last_error)(void);
    HRESULT (*symbol_provider_open)(const char *, ICorDebugSymbolProvider2 **);
    HRESULT (*symbol_provider_open_image)(const char *, ICorDebugSymbolProvider2 **);
    HRESULT (*symbol_provider_from_memory)(const uint8_t *, uintptr_t, ICorDebugSymbolProvider2 **);
    HRESULT (*dict_lookup)(ICorDebugSymbolProvider2 *, uint32_t, char *, uint32_t, uint32_t *);
    HRESULT (*profiler_info_open)(const char *, ICorProfilerInfo **);
    HRESULT (*profiler_info_open_pid)(uint32_t, uint32_t, ICorProfilerInfo **);
    HRESULT (*profiler_info_function_ids)(ICorProfilerInfo *, uint64_t *, uint32_t, uint32_t *);
    HRESULT (*profiler_info_symbolize)(ICorProfilerInfo *, uint64_t, uint64_t *, uint32_t *);
    HRESULT (*symbolizer_open)(const char *, const char *, const char *const *, uint32_t, ClrmapSymbolizer **);
    HRESULT (*symbolizer_open_pid)(uint32_t, uint32_t, const char *, const char *const *, uint32_t, ClrmapSymbolizer **);
    HRESULT (*symbolizer_symbolize)(const ClrmapSymbolizer *, uint64_t, uint32_t, ClrmapFrame *);
    void (*symbolizer_release)(ClrmapSymbolizer *);
    HRESULT (*symbolizer_open_with_servers)(const char *, const char *, const char *const *, uint32_t, const ClrmapSymbolServers *, ClrmapSymbolizer **);
    HRESULT (*symbolizer_symbolize_inlined)(const ClrmapSymbolizer *, uint64_t, uint32_t, ClrmapFrame *, uint32_t, uint32_t *);
    HRESULT (*symbolizer_source_link)(const ClrmapSymbolizer *, uint64_t, uint32_t, char *, uint32_t, uint32_t *);
};
static const Exports exports = {
    &clrmap_last_error,
    &clrmap_clear_last_error,
    &clrmap_symbol_provider_open,
    &clrmap_symbol_provider_open_image,
    &clrmap_symbol_provider_from_memory,
    &clrmap_dict_lookup,
    &clrmap_profiler_info_open,
    &clrmap_profiler_info_open_pid,
    &clrmap_profiler_info_function_ids,
    &clrmap_profiler_info_symbolize,
    &clrmap_symbolizer_open,
    &clrmap_symbolizer_open_pid,
    &clrmap_symbolizer_symbolize,
    &clrmap_symbolizer_release,
    &clrmap_symbolizer_open_with_servers,
    &clrmap_symbolizer_symbolize_inlined,
    &clrmap_symbolizer_source_link,
};
static_assert(sizeof(ClrmapSymbolServers) == 2 * sizeof(void *) + 8, "ClrmapSymbolServers: servers, count, timeout_ms, cache");

static bool same(const GUID &a, const GUID &b) { return std::memcmp(&a, &b, sizeof a) == 0; }

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: test_cpp MAP\n");
        return 2;
    }
    for (const GUID *g : iids) CHECK(g != nullptr);
    CHECK(same(IID_IUnknown, GUID{0, 0, 0, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}}));
    for (HRESULT hr : hresults) CHECK(hr == CLRMAP_S_OK || hr == CLRMAP_S_FALSE || hr < 0);
    CHECK(flags[4] == 4 && flags[9] == 2);

    // The last error, through the typed table.
    ClrmapError e;
    exports.clear_last_error();
    CHECK(exports.last_error(&e) == CLRMAP_S_FALSE && e.kind == nullptr);

    // A dictionary map, its buffer, and the vtable slots of both objects.
    ICorDebugSymbolProvider2 *p = nullptr;
    CHECK(exports.symbol_provider_open(argv[1], &p) == CLRMAP_S_OK && p != nullptr);
    const ICorDebugSymbolProvider2Vtbl *pv = p->lpVtbl;
    void *q = nullptr;
    CHECK(pv->QueryInterface(p, &IID_ICorDebugSymbolProvider2, &q) == CLRMAP_S_OK && q == p);
    CHECK(pv->AddRef(p) == 3 && pv->Release(p) == 2 && pv->Release(p) == 1);
    uint32_t a = 0, b = 0;
    CHECK(pv->GetFrameProps(p, 0x1000, &a, &b) == CLRMAP_E_NOTIMPL);
    ICorDebugMemoryBuffer *buf = nullptr;
    CHECK(pv->GetGenericDictionaryInfo(p, &buf) == CLRMAP_S_OK && buf != nullptr);
    const ICorDebugMemoryBufferVtbl *bv = buf->lpVtbl;
    const void *start = nullptr;
    uint32_t size = 0;
    CHECK(bv->GetStartAddress(buf, &start) == CLRMAP_S_OK && start != nullptr);
    CHECK(bv->GetSize(buf, &size) == CLRMAP_S_OK && size > 0);
    CHECK(bv->QueryInterface(buf, &IID_ICorDebugMemoryBuffer, &q) == CLRMAP_S_OK && q == buf);
    CHECK(bv->AddRef(buf) == 3 && bv->Release(buf) == 2 && bv->Release(buf) == 1 && bv->Release(buf) == 0);
    uint32_t need = 0;
    CHECK(exports.dict_lookup(p, 0x1000, nullptr, 0, &need) == CLRMAP_S_FALSE && need > 1);
    std::vector<char> text(need);
    CHECK(exports.dict_lookup(p, 0x1000, text.data(), need, &need) == CLRMAP_S_OK && std::strcmp(text.data(), "int32") == 0);
    CHECK(exports.dict_lookup(p, 0xFFFFFFF0u, nullptr, 0, &need) == CLRMAP_E_INVALIDARG);
    CHECK(exports.last_error(&e) == CLRMAP_S_OK && e.location_kind == CLRMAP_LOCATION_RVA && std::strcmp(e.kind, "not_found") == 0);
    CHECK(pv->Release(p) == 0);

    const uint8_t map[] = {2, 0, 0, 0x80, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 2, 1, 8};
    CHECK(exports.symbol_provider_from_memory(map, sizeof map, &p) == CLRMAP_S_OK);
    CHECK(p->lpVtbl->Release(p) == 0);
    CHECK(exports.symbol_provider_open_image(argv[1], &p) == CLRMAP_E_BAD_IMAGE);

    // The profiler-info object and the symbolizer: the failure paths (no image here).
    ICorProfilerInfo *info = nullptr;
    CHECK(exports.profiler_info_open("/nonexistent", &info) == CLRMAP_E_FILE_NOT_FOUND && info == nullptr);
    CHECK(exports.profiler_info_open_pid(0, 100, nullptr) == CLRMAP_E_POINTER);
    uint32_t count = 0;
    CHECK(exports.profiler_info_function_ids(nullptr, nullptr, 0, &count) == CLRMAP_E_POINTER);
    uint64_t fid = 0;
    uint32_t il = 0;
    CHECK(exports.profiler_info_symbolize(nullptr, 0, &fid, &il) == CLRMAP_E_POINTER);
    ClrmapSymbolizer *sym = nullptr;
    const char *const dirs[] = {"/nonexistent"};
    CHECK(exports.symbolizer_open("/nonexistent", nullptr, dirs, 1, &sym) == CLRMAP_E_FILE_NOT_FOUND && sym == nullptr);
    CHECK(exports.symbolizer_open_pid(0, 100, nullptr, nullptr, 1, &sym) == CLRMAP_E_POINTER && sym == nullptr);
    ClrmapFrame frame;
    CHECK(exports.symbolizer_symbolize(nullptr, 0, CLRMAP_FRAME_LEAF, &frame) == CLRMAP_E_POINTER);
    exports.symbolizer_release(nullptr);

    // The profiler-info vtable's types, slot by slot.
    HRESULT (*map1)(ICorProfilerInfo *, FunctionID, uint32_t, uint32_t *, COR_DEBUG_IL_TO_NATIVE_MAP *) = nullptr;
    HRESULT (*map2)(ICorProfilerInfo *, FunctionID, ReJITID, uint32_t, uint32_t *, COR_DEBUG_IL_TO_NATIVE_MAP *) = nullptr;
    HRESULT (*map3)(ICorProfilerInfo *, uintptr_t, uint32_t, uint32_t *, COR_DEBUG_IL_TO_NATIVE_MAP *) = nullptr;
    ClrmapReservedSlot reserved = nullptr;
    ICorProfilerInfoVtbl vt;
    std::memset(&vt, 0, sizeof vt);
    vt.GetILToNativeMapping = map1;
    vt.GetILToNativeMapping2 = map2;
    vt.GetILToNativeMapping3 = map3;
    vt.reserved_3_34[0] = reserved;
    CHECK(vt.QueryInterface == nullptr && vt.AddRef == nullptr && vt.Release == nullptr && vt.reserved_36_77[0] == nullptr &&
          vt.reserved_79_90[0] == nullptr && vt.reserved_92[0] == nullptr);

    if (failures) {
        std::fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    std::fprintf(stderr, "c-tests: C++ checks passed\n");
    return 0;
}
