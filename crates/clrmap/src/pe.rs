//! The PE/COFF container of a .NET image, through the `object` crate.
//!
//! clrmap needs little from PE: the section table (to map RVAs to file offsets) and the CLI
//! header (ECMA-335 II.25.3.3, "COR20"), which leads to the metadata and, in a ReadyToRun image,
//! to the ManagedNativeHeader. Both PE32 and PE32+ are accepted, and so is any `Machine` value:
//! Linux ReadyToRun images use 0xFD1D (AMD64 xor the Linux marker), which is not a machine
//! `object` knows by name.

use object::pe::{ImageDosHeader, ImageNtHeaders32, ImageNtHeaders64, IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR};
use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, SectionTable};
use object::LittleEndian as LE;

use crate::read::{Error, ErrorKind, Reader, Result};

/// An RVA and a size, as in a PE data directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    /// Relative virtual address.
    pub rva: u32,
    /// Size in bytes.
    pub size: u32,
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
        let mut image = PeImage { data, sections, machine, is_64, cor20: None };
        if let Some(dir) = dirs.get(IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR) {
            let (rva, size) = dir.address_range();
            if rva != 0 && size != 0 {
                image.cor20 = Some(image.read_cor20(rva)?);
            }
        }
        Ok(image)
    }

    fn read_cor20(&self, rva: u32) -> Result<Cor20Header> {
        let mut r = self.reader_at(rva, 72)?;
        let dir = |r: &mut Reader<'a>| -> Result<Directory> {
            Ok(Directory { rva: r.u32("an RVA")?, size: r.u32("a size")? })
        };
        let _cb = r.u32("the CLI header size")?;
        let major_runtime_version = r.u16("MajorRuntimeVersion")?;
        let minor_runtime_version = r.u16("MinorRuntimeVersion")?;
        let metadata = dir(&mut r)?;
        let flags = r.u32("Flags")?;
        let entry_point = r.u32("EntryPointToken")?;
        let resources = dir(&mut r)?;
        let _strong_name = dir(&mut r)?;
        let _code_manager = dir(&mut r)?;
        let _vtable_fixups = dir(&mut r)?;
        let _export_jumps = dir(&mut r)?;
        let managed_native_header = dir(&mut r)?;
        Ok(Cor20Header {
            major_runtime_version,
            minor_runtime_version,
            metadata,
            flags,
            entry_point,
            resources,
            managed_native_header,
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

    /// The file offset of an RVA, if a section's raw data holds it.
    pub fn rva_to_offset(&self, rva: u32) -> Option<u32> {
        self.sections.pe_file_range_at(rva).map(|(offset, _)| offset)
    }

    /// A reader over `size` bytes at `rva`, with absolute file offsets. `bad_image` if the range is
    /// not inside one section's raw data.
    pub fn reader_at(&self, rva: u32, size: u32) -> Result<Reader<'a>> {
        let (offset, len) = self
            .sections
            .pe_file_range_at(rva)
            .ok_or_else(|| bad(u64::from(rva), "an RVA inside a section"))?;
        if size > len {
            return Err(bad(u64::from(offset), "a range inside one section"));
        }
        let mut r = Reader::new(self.data, 0);
        r.skip(offset as usize, "section data")?;
        r.split(size as usize, "section data").map_err(|e| e.with_kind(ErrorKind::BadImage))
    }

    /// A reader from `rva` to the end of its section's raw data.
    pub fn reader_from(&self, rva: u32) -> Result<Reader<'a>> {
        let (_, len) = self
            .sections
            .pe_file_range_at(rva)
            .ok_or_else(|| bad(u64::from(rva), "an RVA inside a section"))?;
        self.reader_at(rva, len)
    }

    /// The sections: (name, virtual address, virtual size, file offset, file size).
    pub fn sections(&self) -> impl Iterator<Item = (&'a [u8], u32, u32, u32, u32)> + '_ {
        self.sections.iter().map(|s| {
            (
                s.raw_name(),
                s.virtual_address.get(LE),
                s.virtual_size.get(LE),
                s.pointer_to_raw_data.get(LE),
                s.size_of_raw_data.get(LE),
            )
        })
    }
}
