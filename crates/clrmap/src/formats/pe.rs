//! The PE/COFF container of a .NET image, through the `object` crate.
//!
//! clrmap needs little from PE: the section table (to map RVAs to file offsets) and the CLI
//! header (ECMA-335 II.25.3.3, "COR20"), which leads to the metadata and, in a ReadyToRun image,
//! to the ManagedNativeHeader. Both PE32 and PE32+ are accepted, and so is any `Machine` value:
//! Linux ReadyToRun images use 0xFD1D (AMD64 xor the Linux marker), which is not a machine
//! `object` knows by name.

use object::pe::{ImageCor20Header, ImageDataDirectory, ImageDebugDirectory, ImageDosHeader, ImageNtHeaders32, ImageNtHeaders64, IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR, IMAGE_DIRECTORY_ENTRY_DEBUG};
use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, SectionTable};
use object::LittleEndian as LE;

use crate::base::read::{Error, ErrorKind, Reader, Result};

/// An RVA and a size, as in a PE data directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    /// Relative virtual address.
    pub rva: u32,
    /// Size in bytes.
    pub size: u32,
}

/// The CLI header's size (ECMA-335 II.25.3.3: 72 bytes), checked against `object`'s layout of it.
const COR20_SIZE: u32 = 72;
const _: () = assert!(core::mem::size_of::<ImageCor20Header>() == COR20_SIZE as usize);
/// A debug directory entry's size (PE/COFF "Debug Directory": 28 bytes), checked likewise.
const DEBUG_ENTRY_SIZE: usize = 28;
const _: () = assert!(core::mem::size_of::<ImageDebugDirectory>() == DEBUG_ENTRY_SIZE);
/// Every `object` struct read from an image's bytes must read at any offset: with the
/// `unaligned` feature their alignment is 1 (a build without it fails here, not on real files).
const _ALIGN_ONE: () = assert!(
    core::mem::align_of::<ImageDebugDirectory>() == 1
        && core::mem::align_of::<ImageCor20Header>() == 1
        && core::mem::align_of::<ImageDosHeader>() == 1
        && core::mem::align_of::<ImageNtHeaders32>() == 1
        && core::mem::align_of::<ImageNtHeaders64>() == 1
        && core::mem::align_of::<object::pe::ImageSectionHeader>() == 1
);

impl From<&ImageDataDirectory> for Directory {
    fn from(dir: &ImageDataDirectory) -> Self {
        let (rva, size) = dir.address_range();
        Directory { rva, size }
    }
}

/// The CLI header (ECMA-335 II.25.3.3), the fields clrmap uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cor20Header {
    /// `MajorRuntimeVersion`.
    pub major_runtime_version: u16,
    /// `MinorRuntimeVersion`.
    pub minor_runtime_version: u16,
    /// The metadata root (`BSJB`).
    pub metadata: Directory,
    /// `Flags` (COMIMAGE_FLAGS_*).
    pub flags: u32,
    /// `EntryPointToken` (or RVA for native entry points).
    pub entry_point: u32,
    /// `Resources`.
    pub resources: Directory,
    /// `ManagedNativeHeader`: the READYTORUN_HEADER in a ReadyToRun image.
    pub managed_native_header: Directory,
}

/// A parsed PE image: the bytes, the section table, and the CLI header if any.
#[derive(Debug)]
pub struct PeImage<'a> {
    data: &'a [u8],
    sections: SectionTable<'a>,
    machine: u16,
    is_64: bool,
    cor20: Option<Cor20Header>,
    /// The COM descriptor data directory: where the CLI header is.
    cli: Directory,
    debug: Directory,
}

/// `IMAGE_DEBUG_TYPE_CODEVIEW`.
pub const DEBUG_TYPE_CODEVIEW: u32 = 2;
/// `IMAGE_DEBUG_TYPE_EMBEDDED_PORTABLE_PDB` (PE-COFF.md, "Embedded Portable PDB Debug Directory Entry").
pub const DEBUG_TYPE_EMBEDDED_PORTABLE_PDB: u32 = 17;
/// `IMAGE_DEBUG_TYPE_PDBCHECKSUM`.
pub const DEBUG_TYPE_PDB_CHECKSUM: u32 = 19;
/// The CodeView entry's MinorVersion that marks a portable PDB (PE-COFF.md: `0x504D`, "PM").
pub const PORTABLE_CODEVIEW_MINOR: u16 = 0x504D;

/// One `IMAGE_DEBUG_DIRECTORY` entry (PE/COFF "Debug Directory", 28 bytes), read as `object`'s
/// `ImageDebugDirectory`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebugEntry {
    /// `TimeDateStamp`: for a portable PDB's CodeView entry, the last 4 bytes of the PDB id.
    pub stamp: u32,
    /// `MajorVersion`.
    pub major: u16,
    /// `MinorVersion`.
    pub minor: u16,
    /// `Type` (`DEBUG_TYPE_*`).
    pub kind: u32,
    /// `SizeOfData`.
    pub size: u32,
    /// `AddressOfRawData` (RVA; 0 when not mapped).
    pub rva: u32,
    /// `PointerToRawData` (file offset).
    pub file_offset: u32,
}

/// A CodeView `RSDS` record (PE-COFF.md, "CodeView Debug Directory Entry").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeView<'a> {
    /// The debug entry holding it (its `stamp` completes a portable PDB's id).
    pub entry: DebugEntry,
    /// The PDB GUID, as stored (16 bytes, GUID byte order).
    pub guid: [u8; 16],
    /// `Age`.
    pub age: u32,
    /// The PDB path the compiler wrote, UTF-8 (may be a Windows path).
    pub path: &'a str,
}

impl CodeView<'_> {
    /// True when the entry names a portable PDB (MinorVersion `0x504D`).
    pub fn is_portable(&self) -> bool {
        self.entry.minor == PORTABLE_CODEVIEW_MINOR
    }

    /// The 20-byte portable PDB id this entry asks for: the GUID then the entry's TimeDateStamp.
    pub fn pdb_id(&self) -> [u8; 20] {
        let mut id = [0u8; 20];
        for (d, s) in id.iter_mut().zip(self.guid.iter().chain(self.entry.stamp.to_le_bytes().iter())) {
            *d = *s;
        }
        id
    }

    /// The PDB's file name: the path's last component, `/` or `\\` separated.
    pub fn file_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(self.path)
    }
}

fn bad(offset: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadImage, offset, expected)
}

impl<'a> PeImage<'a> {
    /// Parse the PE headers of `data`.
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        let magic = object::read::pe::optional_header_magic(data).map_err(|_| bad(0, "a PE image"))?;
        match magic {
            object::pe::IMAGE_NT_OPTIONAL_HDR32_MAGIC => Self::parse_as::<ImageNtHeaders32>(data, false),
            object::pe::IMAGE_NT_OPTIONAL_HDR64_MAGIC => Self::parse_as::<ImageNtHeaders64>(data, true),
            _ => Err(bad(0, "a PE32 or PE32+ optional header")),
        }
    }

    fn parse_as<Pe: ImageNtHeaders>(data: &'a [u8], is_64: bool) -> Result<Self> {
        let dos = ImageDosHeader::parse(data).map_err(|_| bad(0, "an MZ header"))?;
        let mut offset = u64::from(dos.nt_headers_offset());
        let nt_offset = offset;
        let (nt, dirs) = Pe::parse(data, &mut offset).map_err(|_| bad(nt_offset, "PE NT headers"))?;
        let sections = nt.sections(data, offset).map_err(|_| bad(offset, "a section table"))?;
        let machine = nt.file_header().machine.get(LE);
        let _ = nt.optional_header().magic();
        let mut image = PeImage { data, sections, machine, is_64, cor20: None, cli: Directory::default(), debug: Directory::default() };
        if let Some(dir) = dirs.get(IMAGE_DIRECTORY_ENTRY_DEBUG) {
            image.debug = dir.into();
        }
        if let Some(dir) = dirs.get(IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR) {
            let (rva, size) = dir.address_range();
            image.cli = Directory { rva, size };
            if rva != 0 && size != 0 {
                image.cor20 = Some(image.read_cor20(rva)?);
            }
        }
        Ok(image)
    }

    /// The CLI header at `rva`, read as `object`'s `ImageCor20Header`. Its 72 bytes must lie in
    /// one section's raw data inside the file ([`PeImage::reader_at`] says where they do not).
    /// Its `cb` is not checked: every field clrmap reads is inside the fixed 72 bytes.
    fn read_cor20(&self, rva: u32) -> Result<Cor20Header> {
        let r = self.reader_at(rva, COR20_SIZE)?;
        // `from_bytes` fails only on a short slice, which `reader_at` has ruled out; with
        // `object`'s `unaligned` feature there is no alignment to fail on (`_ALIGN_ONE`).
        let (h, _) = object::pod::from_bytes::<ImageCor20Header>(r.as_slice()).map_err(|()| bad(r.offset(), "a 72-byte CLI header"))?;
        Ok(Cor20Header {
            major_runtime_version: h.major_runtime_version.get(LE),
            minor_runtime_version: h.minor_runtime_version.get(LE),
            metadata: (&h.meta_data).into(),
            flags: h.flags.get(LE),
            entry_point: h.entry_point_token_or_rva.get(LE),
            resources: (&h.resources).into(),
            managed_native_header: (&h.managed_native_header).into(),
        })
    }

    /// The whole file.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The COFF `Machine` field (0x8664 for AMD64, 0xFD1D for Linux AMD64 ReadyToRun, ...).
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// True for PE32+.
    pub fn is_64(&self) -> bool {
        self.is_64
    }

    /// The CLI header, if this is a .NET image.
    pub fn cor20(&self) -> Option<&Cor20Header> {
        self.cor20.as_ref()
    }

    /// The CLI header, or `bad_image` if this is not a .NET image.
    pub fn require_cor20(&self) -> Result<&Cor20Header> {
        self.cor20.as_ref().ok_or_else(|| bad(0, "a CLI (COR20) header"))
    }

    /// The file range (offset, length) of the CLI header's 72 bytes, if the image has one and a
    /// section's raw data holds its RVA (the length is not checked against the section's).
    pub fn cli_header_range(&self) -> Option<(u32, u32)> {
        if self.cli.rva == 0 || self.cli.size == 0 {
            return None;
        }
        Some((self.rva_to_offset(self.cli.rva)?, COR20_SIZE))
    }

    /// The file offset of an RVA, if a section's raw data holds it.
    pub fn rva_to_offset(&self, rva: u32) -> Option<u32> {
        self.sections.pe_file_range_at(rva).map(|(offset, _)| offset)
    }

    /// A reader over `size` bytes at `rva`, with absolute file offsets. `bad_image` if the range is
    /// not inside one section's raw data.
    pub fn reader_at(&self, rva: u32, size: u32) -> Result<Reader<'a>> {
        let (offset, len) = self.sections.pe_file_range_at(rva).ok_or_else(|| Error::at_rva(ErrorKind::BadImage, rva, "an RVA inside a section"))?;
        if size > len {
            return Err(bad(u64::from(offset), "a range inside one section"));
        }
        // A section whose raw data starts past the end of the file: the file ends too soon, and
        // the place to say so is where it ends.
        let mut r = Reader::new(self.data, 0);
        r.skip(offset as usize, "section data").map_err(|_| bad(self.data.len() as u64, "section data inside the file"))?;
        r.split(size as usize, "section data").map_err(|e| e.with_kind(ErrorKind::BadImage))
    }

    /// A reader from `rva` to the end of its section's raw data.
    pub fn reader_from(&self, rva: u32) -> Result<Reader<'a>> {
        let (_, len) = self.sections.pe_file_range_at(rva).ok_or_else(|| Error::at_rva(ErrorKind::BadImage, rva, "an RVA inside a section"))?;
        self.reader_at(rva, len)
    }

    /// The debug directory's entries (PE/COFF "Debug Directory"). Empty when there is none; a
    /// directory outside the sections is `bad_image`.
    pub fn debug_entries(&self) -> Result<Vec<DebugEntry>> {
        if self.debug.rva == 0 || self.debug.size == 0 {
            return Ok(Vec::new());
        }
        let r = self.reader_at(self.debug.rva, self.debug.size)?;
        // Whole 28-byte entries only: a partial one at the end is not read. The count is bounded
        // by the directory's bytes, which are in the file. Neither the PE/COFF spec nor .NET's
        // reader asks the directory to be aligned (real images put it at 0x872), so `object` is
        // built with its `unaligned` feature: its integer fields are byte arrays, of alignment 1,
        // and `slice_from_bytes` reads at any offset (`_ALIGN_ONE` below holds it).
        let count = r.len() / DEBUG_ENTRY_SIZE;
        let (entries, _) = object::pod::slice_from_bytes::<ImageDebugDirectory>(r.as_slice(), count).map_err(|()| bad(r.offset(), "whole debug directory entries"))?;
        Ok(entries
            .iter()
            .map(|e| DebugEntry {
                stamp: e.time_date_stamp.get(LE),
                major: e.major_version.get(LE),
                minor: e.minor_version.get(LE),
                kind: e.typ.get(LE),
                size: e.size_of_data.get(LE),
                rva: e.address_of_raw_data.get(LE),
                file_offset: e.pointer_to_raw_data.get(LE),
            })
            .collect())
    }

    /// The bytes of a debug entry's data, by its file offset (`PointerToRawData`), with absolute
    /// offsets. `bad_image` if they are not in the file.
    pub fn debug_data(&self, entry: &DebugEntry) -> Result<Reader<'a>> {
        let mut r = Reader::new(self.data, 0);
        r.skip(entry.file_offset as usize, "debug data inside the file").map_err(|e| e.with_kind(ErrorKind::BadImage))?;
        r.split(entry.size as usize, "debug data inside the file").map_err(|e| e.with_kind(ErrorKind::BadImage))
    }

    /// The CodeView `RSDS` entry that names the image's PDB (PE-COFF.md, "CodeView Debug
    /// Directory Entry"): the first *portable* one (MinorVersion `0x504D`), wherever it stands,
    /// as System.Reflection.Metadata's `PEReader.TryOpenAssociatedPortablePdb` chooses it. The
    /// kind is the entry's version, not its position: a ReadyToRun framework assembly built on
    /// Windows has a Windows `.ni.pdb` entry first and the portable one second.
    ///
    /// With no portable entry, the first well-formed Windows one, so that a caller can say the
    /// image names a Windows (MSF) PDB ([`CodeView::is_portable`] tells them apart). A malformed
    /// portable entry is `bad_image`; a malformed Windows one is passed over.
    pub fn codeview(&self) -> Result<Option<CodeView<'a>>> {
        let mut windows = None;
        for entry in self.debug_entries()? {
            if entry.kind != DEBUG_TYPE_CODEVIEW {
                continue;
            }
            if entry.minor == PORTABLE_CODEVIEW_MINOR {
                return self.read_codeview(entry).map(Some);
            }
            if windows.is_none() {
                windows = self.read_codeview(entry).ok();
            }
        }
        Ok(windows)
    }

    /// The PdbChecksum entries (PE-COFF.md, "PDB Checksum Debug Directory Entry", type 19):
    /// each an algorithm name (`SHA256`) and the checksum of the PDB it names, as `(name,
    /// bytes)`. Malformed entries are passed over: they only add a header to a symbol-server
    /// request, and the PDB is verified by its id whatever they say.
    pub fn pdb_checksums(&self) -> Vec<(&'a str, &'a [u8])> {
        let Ok(entries) = self.debug_entries() else { return Vec::new() };
        entries
            .iter()
            .filter(|e| e.kind == DEBUG_TYPE_PDB_CHECKSUM)
            .filter_map(|e| {
                // AlgorithmName: a NUL-terminated UTF-8 string; Checksum: the rest.
                let data = self.debug_data(e).ok()?.as_slice();
                let nul = data.iter().position(|&b| b == 0)?;
                let name = core::str::from_utf8(data.get(..nul)?).ok().filter(|n| !n.is_empty())?;
                let sum = data.get(nul.checked_add(1)?..).filter(|s| !s.is_empty())?;
                Some((name, sum))
            })
            .collect()
    }

    /// One CodeView entry's data: 'RSDS', Guid (16), Age (u32), Path (UTF-8, NUL-terminated).
    fn read_codeview(&self, entry: DebugEntry) -> Result<CodeView<'a>> {
        let mut r = self.debug_data(&entry)?;
        let at = r.offset();
        if r.u32("the CodeView signature RSDS")? != 0x5344_5352 {
            return Err(bad(at, "the CodeView signature RSDS"));
        }
        let guid = r.array::<16>("the PDB GUID")?;
        let age = r.u32("the PDB age")?;
        let path_at = r.offset();
        let rest = r.as_slice();
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let path = core::str::from_utf8(rest.get(..len).unwrap_or(&[])).map_err(|_| bad(path_at, "a UTF-8 PDB path"))?;
        Ok(CodeView { entry, guid, age, path })
    }

    /// The sections: (name, virtual address, virtual size, file offset, file size).
    pub fn sections(&self) -> impl Iterator<Item = (&'a [u8], u32, u32, u32, u32)> + '_ {
        self.sections.iter().map(|s| (s.raw_name(), s.virtual_address.get(LE), s.virtual_size.get(LE), s.pointer_to_raw_data.get(LE), s.size_of_raw_data.get(LE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::read::Location;

    #[test]
    fn an_rva_outside_the_sections_is_reported_as_an_rva() {
        let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
        let pe = PeImage::parse(&bytes).unwrap();
        let e = pe.reader_at(0x0100_0000, 4).unwrap_err();
        assert_eq!((e.kind, e.location), (ErrorKind::BadImage, Location::Rva(0x0100_0000)));
        assert_eq!(e.to_string(), "bad_image at RVA 0x1000000: expected an RVA inside a section");
        // The file cut before a section's raw data: the error is where the file ends.
        let cut = &bytes[..1000];
        let pe = PeImage::parse(cut).unwrap_or_else(|e| panic!("{e}"));
        let last = pe.sections().max_by_key(|s| s.3).unwrap();
        assert!(last.3 > 1000);
        let e = pe.reader_at(last.1, 4).unwrap_err();
        assert_eq!(e.location, Location::Offset(1000));
        // A real debug directory: the CodeView entry of a portable PDB, and its PDB id.
        let pe = PeImage::parse(&bytes).unwrap();
        let cv = pe.codeview().unwrap().unwrap();
        assert!(cv.is_portable());
        assert_eq!(cv.file_name(), "Frames.pdb");
    }

    /// Frames.dll with its COM descriptor directory (data directory 14) set to `rva`, 72.
    fn with_cor20_at(bytes: &[u8], rva: u32) -> Vec<u8> {
        let mut bytes = bytes.to_vec();
        let nt = u32::from_le_bytes(bytes[0x3C..0x40].try_into().unwrap()) as usize;
        // The optional header follows the 4-byte signature and the 20-byte file header; PE32's
        // data directories start 96 bytes into it.
        assert_eq!(&bytes[nt + 24..nt + 26], &[0x0B, 0x01], "a PE32 fixture");
        let dir = nt + 24 + 96 + 14 * 8;
        bytes[dir..dir + 4].copy_from_slice(&rva.to_le_bytes());
        bytes[dir + 4..dir + 8].copy_from_slice(&72u32.to_le_bytes());
        bytes
    }

    #[test]
    fn the_cli_header_reads_through_object_and_fails_where_its_bytes_are_missing() {
        let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
        let pe = PeImage::parse(&bytes).unwrap();
        let h = *pe.require_cor20().unwrap();
        // Roslyn writes runtime version 2.5 and ILONLY; the metadata root starts with BSJB.
        assert_eq!((h.major_runtime_version, h.minor_runtime_version, h.flags & 1), (2, 5, 1));
        assert_eq!(pe.reader_at(h.metadata.rva, 4).unwrap().as_slice(), b"BSJB");
        assert_eq!(h.managed_native_header, Directory::default());
        let (name, text_rva, text_size, text_offset, raw_size) = pe.sections().find(|s| s.0.starts_with(b".text")).unwrap();
        assert!(raw_size >= text_size && text_size > 72, "{name:?}");

        // Past every section: an RVA nothing maps.
        let e = PeImage::parse(&with_cor20_at(&bytes, 0x0100_0000)).unwrap_err();
        assert_eq!((e.kind, e.location, e.expected), (ErrorKind::BadImage, Location::Rva(0x0100_0000), "an RVA inside a section"));
        // 8 bytes before the end of the section: the 72 bytes do not fit in it.
        let end = text_rva + text_size - 8;
        let e = PeImage::parse(&with_cor20_at(&bytes, end)).unwrap_err();
        let at = u64::from(text_offset + text_size - 8);
        assert_eq!((e.kind, e.location, e.expected), (ErrorKind::BadImage, Location::Offset(at), "a range inside one section"));
        // The file cut inside the header: its 72 bytes are not all there, said at its first byte.
        let cut_at = pe.rva_to_offset(h.metadata.rva).unwrap() as usize;
        let moved = with_cor20_at(&bytes, h.metadata.rva);
        let e = PeImage::parse(&moved[..cut_at + 40]).unwrap_err();
        assert_eq!((e.kind, e.location, e.expected), (ErrorKind::BadImage, Location::Offset(cut_at as u64), "section data"));
        // A header anywhere inside a section reads: over the metadata root, `cb` is `BSJB` and
        // MajorRuntimeVersion is the root's MajorVersion, 1.
        let pe_moved = PeImage::parse(&moved).unwrap();
        assert_eq!(pe_moved.require_cor20().unwrap().major_runtime_version, 1);
    }
}
