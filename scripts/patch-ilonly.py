#!/usr/bin/env python3
"""Make a ReadyToRun (or mixed) .NET PE image IL-only by editing PE header fields only.

Used by scripts/install-roslyn.sh on Roslyn's Windows x64 ReadyToRun DLLs, which Linux CoreCLR
refuses to load (shared/spec/symbols.md section 3). For each file it:
  - sets COMIMAGE_FLAGS_ILONLY (0x1) and clears COMIMAGE_FLAGS_32BITREQUIRED (0x4) in the COR20 Flags,
  - zeroes the COR20 header's ManagedNativeHeader directory (the READYTORUN header pointer),
  - zeroes the PE export (0), exception (3) and base-relocation (5) data directories,
  - zeroes the PE AddressOfEntryPoint.
No code or metadata byte changes; the IL and metadata stay where they are. Idempotent.

usage: patch-ilonly.py FILE.dll...
Exit status: 0 if every file was a managed PE (patched or already IL-only), 1 otherwise.
"""
import struct
import sys

DIR_EXPORT, DIR_EXCEPTION, DIR_BASERELOC, DIR_CLR = 0, 3, 5, 14
ILONLY, BIT32REQUIRED = 0x1, 0x4


def rva_to_offset(sections, rva):
    for va, vsize, raw_ptr, raw_size in sections:
        if va <= rva < va + max(vsize, raw_size):
            return rva - va + raw_ptr
    raise ValueError(f"RVA 0x{rva:x} is in no section")


def patch(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if data[:2] != b"MZ":
        raise ValueError("no MZ signature")
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe:pe + 4] != b"PE\0\0":
        raise ValueError("no PE signature")
    coff = pe + 4
    nsections = struct.unpack_from("<H", data, coff + 2)[0]
    opt_size = struct.unpack_from("<H", data, coff + 16)[0]
    opt = coff + 20
    magic = struct.unpack_from("<H", data, opt)[0]
    if magic == 0x20B:
        ndirs_at, dirs_at = opt + 108, opt + 112
    elif magic == 0x10B:
        ndirs_at, dirs_at = opt + 92, opt + 96
    else:
        raise ValueError(f"unknown optional header magic 0x{magic:x}")
    ndirs = struct.unpack_from("<I", data, ndirs_at)[0]
    if ndirs <= DIR_CLR:
        raise ValueError("no CLR data directory")
    sections = []
    sh = opt + opt_size
    for i in range(nsections):
        s = sh + 40 * i
        vsize, va, raw_size, raw_ptr = struct.unpack_from("<IIII", data, s + 8)
        sections.append((va, vsize, raw_ptr, raw_size))
    clr_rva, clr_size = struct.unpack_from("<II", data, dirs_at + 8 * DIR_CLR)
    if clr_rva == 0 or clr_size < 72:
        raise ValueError("not a managed image (no COR20 header)")
    cor = rva_to_offset(sections, clr_rva)

    before = bytes(data)
    flags = struct.unpack_from("<I", data, cor + 16)[0]
    struct.pack_into("<I", data, cor + 16, (flags | ILONLY) & ~BIT32REQUIRED)
    struct.pack_into("<II", data, cor + 64, 0, 0)  # ManagedNativeHeader
    for d in (DIR_EXPORT, DIR_EXCEPTION, DIR_BASERELOC):
        struct.pack_into("<II", data, dirs_at + 8 * d, 0, 0)
    struct.pack_into("<I", data, opt + 16, 0)  # AddressOfEntryPoint
    if bytes(data) == before:
        return False
    with open(path, "wb") as f:
        f.write(data)
    return True


def main(argv):
    status = 0
    for path in argv[1:]:
        try:
            changed = patch(path)
            print(f"patch-ilonly: {path}: {'patched' if changed else 'already IL-only'}")
        except (OSError, ValueError, struct.error) as e:
            print(f"patch-ilonly: {path}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
