/* The symbolizer through the C ABI: open a source with symbol paths, symbolize addresses into
 * ClrmapFrame structs whose strings the symbolizer owns, and the error HRESULTs.
 *
 *   test_symbolizer SOURCE SYMDIR WRONG_PDB ADDRESS...
 *
 * Prints one line per address: "frame ADDRESS flags token il module method file line column
 * end_line end_column", tab-separated (the return-address rule); scripts/c-tests.sh compares them with
 * `clrmap symbolize --json --return-address`. Run under valgrind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmap.h"

#include "check.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_symbolizer SOURCE SYMDIR WRONG_PDB ADDRESS...\n");
        return 2;
    }
    const char *source = argv[1];
    const char *dirs[] = {argv[2]};
    ClrmapSymbolizer *sym = NULL;
    CHECK(clrmap_symbolizer_open(source, NULL, dirs, 1, &sym) == CLRMAP_S_OK && sym);
    int lines = 0;
    for (int i = 4; i < argc; i++) {
        uint64_t address = strtoull(argv[i], NULL, 0);
        ClrmapFrame f;
        memset(&f, 0xAB, sizeof f);
        HRESULT hr = clrmap_symbolizer_symbolize(sym, address, CLRMAP_FRAME_RETURN_ADDRESS, &f);
        CHECK(hr == CLRMAP_S_OK || hr == CLRMAP_S_FALSE);
        CHECK(f.address == address);
        if (f.flags & CLRMAP_FRAME_LINE) {
            lines++;
            CHECK(f.file != NULL && f.line > 0);
        }
        printf("frame %llu\t%u\t%u\t%u\t%s\t%s\t%s\t%u\t%u\t%u\t%u\n", (unsigned long long)address, f.flags, f.token, f.il_offset,
               or_empty(f.module), or_empty(f.method), or_empty(f.file), f.line, f.column, f.end_line, f.end_column);
        /* The same address again: the same strings, by pointer (made once, owned by the symbolizer). */
        ClrmapFrame g;
        CHECK(clrmap_symbolizer_symbolize(sym, address, CLRMAP_FRAME_RETURN_ADDRESS, &g) == hr);
        CHECK(g.method == f.method && g.file == f.file && g.module == f.module);
    }
    CHECK(lines > 0);
    /* An address in no body: S_FALSE, nothing known. */
    ClrmapFrame none;
    CHECK(clrmap_symbolizer_symbolize(sym, 0x10, CLRMAP_FRAME_LEAF, &none) == CLRMAP_S_FALSE);
    CHECK(none.flags == 0 && none.method == NULL && none.file == NULL && none.address == 0x10);
    CHECK(clrmap_symbolizer_symbolize(sym, 0x10, 7, &none) == CLRMAP_E_INVALIDARG);
    CHECK(clrmap_symbolizer_symbolize(sym, 0x10, CLRMAP_FRAME_LEAF, NULL) == CLRMAP_E_POINTER);
    CHECK(clrmap_symbolizer_symbolize(NULL, 0x10, CLRMAP_FRAME_LEAF, &none) == CLRMAP_E_POINTER);
    clrmap_symbolizer_release(sym);
    clrmap_symbolizer_release(NULL);

    /* A PDB that is not the module's: a clear mismatch, no symbolizer. */
    ClrmapSymbolizer *other = NULL;
    CHECK(clrmap_symbolizer_open(source, argv[3], NULL, 0, &other) == CLRMAP_E_PDB_MISMATCH && other == NULL);
    CHECK(clrmap_symbolizer_open("/nonexistent/capture", NULL, NULL, 0, &other) == CLRMAP_E_FILE_NOT_FOUND);
    CHECK(clrmap_symbolizer_open(argv[3], NULL, NULL, 0, &other) == CLRMAP_E_UNRECOGNIZED_FILE); /* a PDB is no source */
    CHECK(clrmap_symbolizer_open(source, NULL, NULL, 1, &other) == CLRMAP_E_POINTER);
    CHECK(clrmap_symbolizer_open(NULL, NULL, NULL, 0, &other) == CLRMAP_E_POINTER);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "c-tests: symbolizer checks passed\n");
    return 0;
}
