/* clrmap.h: the C ABI of clrmap (crates/clrmap-capi). Link with -lclrmap_capi.
 *
 * COM-shaped objects: call through lpVtbl, release with Release. Vtable order is the IDL's
 * (cordebug.idl / corprof.idl), not the docs' alphabetical order. Written by hand to match
 * src/lib.rs; c-tests/test_capi.c checks the slot offsets. */
#ifndef CLRMAP_H
#define CLRMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t HRESULT;

#define CLRMAP_S_OK ((HRESULT)0)
#define CLRMAP_S_FALSE ((HRESULT)1)                       /* two-call protocol: buffer too small */
#define CLRMAP_E_NOTIMPL ((HRESULT)0x80004001)
#define CLRMAP_E_NOINTERFACE ((HRESULT)0x80004002)
#define CLRMAP_E_POINTER ((HRESULT)0x80004003)
#define CLRMAP_E_FAIL ((HRESULT)0x80004005)
#define CLRMAP_E_INVALIDARG ((HRESULT)0x80070057)
#define CLRMAP_E_FILE_NOT_FOUND ((HRESULT)0x80070002)
#define CLRMAP_META_E_BAD_SIGNATURE ((HRESULT)0x80131192) /* malformed map or image */

typedef struct GUID {
    uint32_t data1;
    uint16_t data2;
    uint16_t data3;
    uint8_t data4[8];
} GUID;

/* cordebug.idl / corprof.idl; ilOffset may be NO_MAPPING (0xFFFFFFFF), PROLOG (0xFFFFFFFE),
 * EPILOG (0xFFFFFFFD). */
typedef struct COR_DEBUG_IL_TO_NATIVE_MAP {
    uint32_t ilOffset;
    uint32_t nativeStartOffset;
    uint32_t nativeEndOffset;
} COR_DEBUG_IL_TO_NATIVE_MAP;

/* ICorDebugMemoryBuffer {677888B3-D160-4B8C-A73B-D79E6AAA1D13} */
typedef struct ICorDebugMemoryBuffer ICorDebugMemoryBuffer;
typedef struct ICorDebugMemoryBufferVtbl {
    HRESULT (*QueryInterface)(ICorDebugMemoryBuffer *self, const GUID *riid, void **ppv);
    uint32_t (*AddRef)(ICorDebugMemoryBuffer *self);
    uint32_t (*Release)(ICorDebugMemoryBuffer *self);
    HRESULT (*GetStartAddress)(ICorDebugMemoryBuffer *self, const void **address);
    HRESULT (*GetSize)(ICorDebugMemoryBuffer *self, uint32_t *size);
} ICorDebugMemoryBufferVtbl;
struct ICorDebugMemoryBuffer { const ICorDebugMemoryBufferVtbl *lpVtbl; };

/* ICorDebugSymbolProvider2 {F9801807-4764-4330-9E67-4F685094165E} */
typedef struct ICorDebugSymbolProvider2 ICorDebugSymbolProvider2;
typedef struct ICorDebugSymbolProvider2Vtbl {
    HRESULT (*QueryInterface)(ICorDebugSymbolProvider2 *self, const GUID *riid, void **ppv);
    uint32_t (*AddRef)(ICorDebugSymbolProvider2 *self);
    uint32_t (*Release)(ICorDebugSymbolProvider2 *self);
    /* The generic dictionary map. The buffer keeps the map alive after the provider's release. */
    HRESULT (*GetGenericDictionaryInfo)(ICorDebugSymbolProvider2 *self, ICorDebugMemoryBuffer **ppMemoryBuffer);
    /* E_NOTIMPL. */
    HRESULT (*GetFrameProps)(ICorDebugSymbolProvider2 *self, uint32_t codeRva, uint32_t *pCodeStartRva, uint32_t *pParentFrameStartRva);
} ICorDebugSymbolProvider2Vtbl;
struct ICorDebugSymbolProvider2 { const ICorDebugSymbolProvider2Vtbl *lpVtbl; };

/* ICorProfilerInfo {28B5557D-3F3F-48b4-90B2-5F9EEA2F6C48}, with the slots of Info9 that serve
 * IL-to-native maps; every other slot returns E_NOTIMPL. */
typedef struct ICorProfilerInfo ICorProfilerInfo;
typedef struct ICorProfilerInfoVtbl {
    HRESULT (*QueryInterface)(ICorProfilerInfo *self, const GUID *riid, void **ppv); /* 0 */
    uint32_t (*AddRef)(ICorProfilerInfo *self);                                      /* 1 */
    uint32_t (*Release)(ICorProfilerInfo *self);                                     /* 2 */
    void *reserved_3_34[32];
    /* 35. cMap and *pcMap are element counts; *pcMap always gets the full count; a short buffer
     * is S_OK with a partial copy; (0, &n, NULL) is the size query. */
    HRESULT (*GetILToNativeMapping)(ICorProfilerInfo *self, uintptr_t functionId, uint32_t cMap, uint32_t *pcMap, COR_DEBUG_IL_TO_NATIVE_MAP map[]);
    void *reserved_36_77[42];
    /* 78. The ReJITID is ignored, as the runtime ignores it: the first body answers. */
    HRESULT (*GetILToNativeMapping2)(ICorProfilerInfo *self, uintptr_t functionId, uintptr_t reJitId, uint32_t cMap, uint32_t *pcMap, COR_DEBUG_IL_TO_NATIVE_MAP map[]);
    void *reserved_79_90[12];
    /* 91. One code body, by its code start. */
    HRESULT (*GetILToNativeMapping3)(ICorProfilerInfo *self, uintptr_t pNativeCodeStartAddress, uint32_t cMap, uint32_t *pcMap, COR_DEBUG_IL_TO_NATIVE_MAP map[]);
    void *reserved_92[1];
} ICorProfilerInfoVtbl;
struct ICorProfilerInfo { const ICorProfilerInfoVtbl *lpVtbl; };

/* Open a dictionary map file (memory-mapped), validated strictly. */
HRESULT clrmap_symbol_provider_open(const char *path, ICorDebugSymbolProvider2 **out);
/* Serve a copy of len bytes. */
HRESULT clrmap_symbol_provider_from_memory(const uint8_t *data, size_t len, ICorDebugSymbolProvider2 **out);
/* The types of the dictionary at rva, one per line ("\n"), tokens as 0x01000012. *pcb always gets
 * the size needed (NUL included); S_FALSE when buf is NULL or cb too small; E_INVALIDARG when no
 * entry has this RVA. */
HRESULT clrmap_dict_lookup(ICorDebugSymbolProvider2 *provider, uint32_t rva, char *buf, uint32_t cb, uint32_t *pcb);

/* Open a ReadyToRun image, a .nettrace or a clrmap capture. For an image, a body's FunctionID
 * and code start are both its code-start RVA. */
HRESULT clrmap_profiler_info_open(const char *path, ICorProfilerInfo **out);
/* Sorted FunctionIDs; *pc always gets the count; S_FALSE when c is too small. */
HRESULT clrmap_profiler_info_function_ids(ICorProfilerInfo *info, uint64_t *ids, uint32_t c, uint32_t *pc);
/* The body containing address (an RVA for an image) and the IL offset there. */
HRESULT clrmap_profiler_info_symbolize(ICorProfilerInfo *info, uint64_t address, uint64_t *functionId, uint32_t *ilOffset);

#ifdef __cplusplus
}
#endif
#endif /* CLRMAP_H */
