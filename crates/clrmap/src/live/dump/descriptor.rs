//! The runtime's contract descriptor: the exported `DotNetRuntimeContractDescriptor` of
//! libcoreclr.so, found in a core.
//!
//! Layout (dotnet/runtime `docs/design/datacontracts/contract-descriptor.md`, as the runtime
//! builds it in 9 and 10): `u64 magic` ("DNCCDAC\0"), `u32 flags` (bit 1 set: 32-bit target),
//! `u32 descriptor_size`, `char *descriptor` (JSON), `u32 pointer_data_count`, `u32` padding,
//! `uintptr_t *pointer_data` (the aux pointers). The JSON (`data_descriptor.md`, the compact form the runtime embeds)
//! holds `types` (name to fields; a field is an offset or `[offset, type]`; the key `!` is the
//! type's size), `globals` (name to a value, `[value, type]`, or `[[index], type]` where the
//! value is the aux pointer at `index`) and `contracts` (name to version).
//!
//! The symbol is found through the library's own dynamic symbol table as the core holds it
//! (`PT_DYNAMIC`, `DT_GNU_HASH`/`DT_SYMTAB`/`DT_STRTAB`), or, when the core lacks those pages, in
//! the file on disk when its GNU build id equals the one in the core.

use std::collections::HashMap;

use object::read::elf::{FileHeader, ProgramHeader};
use object::{elf, Endianness, Object, ObjectSymbol};

use super::core::Core;
use crate::base::read::{Error, ErrorKind, Result};

/// The descriptor's magic, "DNCCDAC\0" read as a little-endian `u64`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"DNCCDAC\0");
/// The exported symbol's name.
pub const SYMBOL: &str = "DotNetRuntimeContractDescriptor";
/// The largest descriptor JSON read (the runtime's is about 10 KB).
const MAX_JSON: usize = 4 << 20;
/// The most aux pointers read.
const MAX_AUX: u32 = 1 << 16;
/// The most dynamic entries and hash-chain steps looked at.
const MAX_DYN: u64 = 4096;
const MAX_CHAIN: u32 = 1 << 16;

/// A type's layout: its size, when the descriptor gives one, and its fields' offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TypeLayout {
    /// Size in bytes.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub size: Option<u64>,
    /// Field name to offset.
    pub fields: HashMap<String, u64>,
}

/// A parsed contract descriptor.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Descriptor {
    /// The descriptor's address in the process.
    pub address: u64,
    /// libcoreclr.so's path as the process mapped it.
    pub runtime_path: String,
    /// Where the symbol was found: `core` (the image in memory) or `file` (the file on disk).
    pub found_in: &'static str,
    /// Types by name.
    pub types: HashMap<String, TypeLayout>,
    /// Integer globals by name (aux pointers resolved).
    pub globals: HashMap<String, u64>,
    /// String globals by name.
    pub string_globals: HashMap<String, String>,
    /// Contracts by name, with their versions.
    pub contracts: HashMap<String, u64>,
}

impl Descriptor {
    /// A field's offset.
    pub fn field(&self, ty: &str, field: &str) -> Option<u64> {
        self.types.get(ty)?.fields.get(field).copied()
    }

    /// A type's size.
    pub fn size(&self, ty: &str) -> Option<u64> {
        self.types.get(ty)?.size
    }

    /// An integer global.
    pub fn global(&self, name: &str) -> Option<u64> {
        self.globals.get(name).copied()
    }

    /// A contract's version.
    pub fn contract(&self, name: &str) -> Option<u64> {
        self.contracts.get(name).copied()
    }

    /// Parse the descriptor JSON, resolving `[[index], type]` globals through `aux`.
    pub fn parse_json(json: &[u8], aux: &[u64]) -> Result<Descriptor> {
        let bad = |what: &'static str| Error::nowhere(ErrorKind::BadImage, what);
        let v: serde_json::Value = serde_json::from_slice(json).map_err(|_| bad("the contract descriptor's JSON"))?;
        let mut d = Descriptor::default();
        if let Some(types) = v.get("types").and_then(|t| t.as_object()) {
            for (name, body) in types {
                let mut layout = TypeLayout::default();
                if let Some(fields) = body.as_object() {
                    for (fname, f) in fields {
                        // A field is `offset` or `[offset, type]`; `!` is the type's size.
                        let off = f.as_u64().or_else(|| f.get(0).and_then(number));
                        match (fname.as_str(), off) {
                            ("!", Some(size)) => layout.size = Some(size),
                            (_, Some(off)) => {
                                layout.fields.insert(fname.clone(), off);
                            }
                            _ => {}
                        }
                    }
                }
                d.types.insert(name.clone(), layout);
            }
        }
        if let Some(globals) = v.get("globals").and_then(|g| g.as_object()) {
            for (name, g) in globals {
                // `value`, `[value, type]`, or `[[aux index], type]`.
                let (value, ty) = match g.as_array() {
                    Some(a) => (a.first().cloned().unwrap_or_default(), a.get(1).and_then(|t| t.as_str()).unwrap_or_default()),
                    None => (g.clone(), ""),
                };
                if let Some(index) = value.as_array().and_then(|a| a.first()).and_then(|i| i.as_u64()) {
                    if let Some(p) = usize::try_from(index).ok().and_then(|i| aux.get(i)) {
                        d.globals.insert(name.clone(), *p);
                    }
                } else if ty == "string" {
                    if let Some(s) = value.as_str() {
                        d.string_globals.insert(name.clone(), s.to_owned());
                    }
                } else if let Some(n) = number(&value) {
                    d.globals.insert(name.clone(), n);
                }
            }
        }
        if let Some(contracts) = v.get("contracts").and_then(|c| c.as_object()) {
            for (name, ver) in contracts {
                // A number (.NET 9 and 10), or `"cN"` (the descriptor's version 2, .NET 11).
                let n = number(ver).or_else(|| ver.as_str().and_then(|s| s.strip_prefix('c')).and_then(|n| n.parse().ok()));
                if let Some(n) = n {
                    d.contracts.insert(name.clone(), n);
                }
            }
        }
        Ok(d)
    }
}

/// A JSON number, or a string holding a decimal or `0x` hexadecimal integer (`data_descriptor.md`,
/// "Global values"); negative values in the target's two's complement.
fn number(v: &serde_json::Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    if let Some(n) = v.as_i64() {
        return Some(n as u64);
    }
    let s = v.as_str()?.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => s.parse::<u64>().ok()?,
    };
    Some(if neg { n.wrapping_neg() } else { n })
}

/// The mapping of libcoreclr.so in a core: its path and the address of its first byte (the
/// mapping at file offset 0).
pub fn find_runtime(core: &Core<'_>) -> Option<(String, u64)> {
    core.files().iter().filter(|f| f.file_offset == 0 && f.path.rsplit('/').next() == Some("libcoreclr.so")).map(|f| (f.path.clone(), f.start)).next()
}

/// Find, check and parse the descriptor of the runtime mapped at `base` from `path`.
pub fn read(core: &Core<'_>, path: &str, base: u64) -> Result<Descriptor> {
    let (address, found_in) = match symbol_in_core(core, base, SYMBOL) {
        Ok(a) => (a, "core"),
        Err(in_core) => match symbol_in_file(core, path, base, SYMBOL) {
            Some(a) => (a, "file"),
            None => return Err(in_core),
        },
    };
    let magic = core.u64(address)?;
    if magic != MAGIC {
        return Err(Error::at_address(ErrorKind::BadImage, address, "the contract descriptor's magic DNCCDAC\\0"));
    }
    let flags = core.u32(address.wrapping_add(8))?;
    if flags & 2 != 0 {
        return Err(Error::at_address(ErrorKind::UnsupportedMachine, address, "a 64-bit target"));
    }
    let json_size = usize::try_from(core.u32(address.wrapping_add(12))?).unwrap_or(usize::MAX);
    let json_at = core.u64(address.wrapping_add(16))?;
    let aux_count = core.u32(address.wrapping_add(24))?.min(MAX_AUX);
    let aux_at = core.u64(address.wrapping_add(32))?;
    // The size counts the JSON's bytes; a NUL, when one comes first, ends it.
    if json_size > MAX_JSON {
        return Err(Error::at_address(ErrorKind::OutOfRange, address, "a descriptor JSON of at most 4 MiB"));
    }
    let mut json = vec![0u8; json_size];
    core.read_into(json_at, &mut json)?;
    if let Some(n) = json.iter().position(|&b| b == 0) {
        json.truncate(n);
    }
    let mut aux = Vec::with_capacity(aux_count as usize);
    for i in 0..u64::from(aux_count) {
        aux.push(core.u64(aux_at.wrapping_add(i.wrapping_mul(8)))?);
    }
    let mut d = Descriptor::parse_json(&json, &aux)?;
    d.address = address;
    d.runtime_path = path.to_owned();
    d.found_in = found_in;
    Ok(d)
}

/// The GNU symbol hash (the ELF gABI's DT_GNU_HASH extension: h = h * 33 + c from 5381).
fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(u32::from(c)))
}

/// The tables of a loaded image's dynamic section that symbol lookups need (addresses in the
/// process).
#[derive(Clone, Copy, Debug)]
pub(super) struct DynamicTables {
    /// `DT_SYMTAB`: the dynamic symbols (`Elf64_Sym`, 24 bytes each).
    pub symtab: u64,
    /// `DT_STRTAB`: their names.
    pub strtab: u64,
    /// `DT_GNU_HASH`: the GNU hash table (the gABI's extension), which also bounds their number.
    pub gnu_hash: u64,
}

/// Read the dynamic section at `dynamic` of the image loaded with `bias` (at most `MAX_DYN`
/// entries, to `DT_NULL`); `None` when it lacks one of the tables.
pub(super) fn dynamic_tables(core: &Core<'_>, dynamic: u64, bias: u64) -> Result<Option<DynamicTables>> {
    let (mut symtab, mut strtab, mut gnu) = (None, None, None);
    for i in 0..MAX_DYN {
        let at = dynamic.wrapping_add(i.wrapping_mul(16));
        let (tag, val) = (core.u64(at)?, core.u64(at.wrapping_add(8))?);
        // ld.so relocates these entries in place; an unrelocated one is an offset from the bias.
        let val = if val < bias { val.wrapping_add(bias) } else { val };
        match u32::try_from(tag) {
            Ok(elf::DT_NULL) => break,
            Ok(elf::DT_SYMTAB) => symtab = Some(val),
            Ok(elf::DT_STRTAB) => strtab = Some(val),
            Ok(elf::DT_GNU_HASH) => gnu = Some(val),
            _ => {}
        }
    }
    Ok(match (symtab, strtab, gnu) {
        (Some(symtab), Some(strtab), Some(gnu_hash)) => Some(DynamicTables { symtab, strtab, gnu_hash }),
        _ => None,
    })
}

/// A dynamic symbol's address, through the image's own tables as the core holds them.
pub fn symbol_in_core(core: &Core<'_>, base: u64, name: &str) -> Result<u64> {
    let not_found = || Error::at_address(ErrorKind::NotFound, base, "the runtime's exported contract descriptor");
    let head = core.bytes(base, 64)?;
    let hdr = elf::FileHeader64::<Endianness>::parse(head).map_err(|_| Error::at_address(ErrorKind::BadImage, base, "an ELF header at the runtime's first page"))?;
    let endian = hdr.endian().map_err(|_| Error::at_address(ErrorKind::BadImage, base, "a known byte order"))?;
    let phoff = hdr.e_phoff(endian);
    let phnum = u64::from(hdr.e_phnum(endian)).min(256);
    let mut bias = None;
    let mut dynamic = None;
    for i in 0..phnum {
        let at = base.wrapping_add(phoff).wrapping_add(i.wrapping_mul(56));
        let ph = core.bytes(at, 56)?;
        let p_type = u32::from_le_bytes(ph.get(0..4).and_then(|b| b.try_into().ok()).unwrap_or_default());
        let word = |o: usize| u64::from_le_bytes(ph.get(o..o.saturating_add(8)).and_then(|b| b.try_into().ok()).unwrap_or_default());
        let (offset, vaddr) = (word(8), word(16));
        if p_type == elf::PT_LOAD && offset == 0 && bias.is_none() {
            bias = Some(base.wrapping_sub(vaddr & !0xFFF));
        }
        if p_type == elf::PT_DYNAMIC {
            dynamic = Some(vaddr);
        }
    }
    let bias = bias.unwrap_or(base);
    let dynamic = dynamic.ok_or_else(not_found)?.wrapping_add(bias);
    let Some(DynamicTables { symtab, strtab, gnu_hash: gnu }) = dynamic_tables(core, dynamic, bias)? else { return Err(not_found()) };
    // DT_GNU_HASH: nbuckets, symoffset, bloom_size, bloom_shift, bloom[bloom_size] (u64),
    // buckets[nbuckets] (u32), chain[] (u32, bit 0 ends a bucket's run).
    let nbuckets = core.u32(gnu)?;
    let symoffset = core.u32(gnu.wrapping_add(4))?;
    let bloom_size = core.u32(gnu.wrapping_add(8))?;
    if nbuckets == 0 {
        return Err(not_found());
    }
    let h = gnu_hash(name.as_bytes());
    let buckets = gnu.wrapping_add(16).wrapping_add(u64::from(bloom_size).wrapping_mul(8));
    let chains = buckets.wrapping_add(u64::from(nbuckets).wrapping_mul(4));
    let mut i = core.u32(buckets.wrapping_add(u64::from(h.checked_rem(nbuckets).unwrap_or(0)).wrapping_mul(4)))?;
    if i < symoffset {
        return Err(not_found());
    }
    for _ in 0..MAX_CHAIN {
        let c = core.u32(chains.wrapping_add(u64::from(i.wrapping_sub(symoffset)).wrapping_mul(4)))?;
        if c | 1 == h | 1 {
            let sym = symtab.wrapping_add(u64::from(i).wrapping_mul(24));
            let st_name = core.u32(sym)?;
            if core.c_string(strtab.wrapping_add(u64::from(st_name)), 256)? == name.as_bytes() {
                return Ok(core.u64(sym.wrapping_add(8))?.wrapping_add(bias));
            }
        }
        if c & 1 != 0 {
            break;
        }
        i = i.wrapping_add(1);
    }
    Err(not_found())
}

/// The GNU build id of the image whose notes are in `notes` (`NT_GNU_BUILD_ID`, owner "GNU").
fn build_id_in(mut notes: object::read::elf::NoteIterator<'_, elf::FileHeader64<Endianness>>, endian: Endianness) -> Option<Vec<u8>> {
    while let Ok(Some(n)) = notes.next() {
        if n.name() == b"GNU" && n.n_type(endian) == elf::NT_GNU_BUILD_ID {
            return Some(n.desc().to_vec());
        }
    }
    None
}

/// The build id of the image mapped at `base`, from its note segment in the core.
fn build_id_in_core(core: &Core<'_>, base: u64) -> Option<Vec<u8>> {
    let head = core.bytes(base, 64).ok()?;
    let hdr = elf::FileHeader64::<Endianness>::parse(head).ok()?;
    let endian = hdr.endian().ok()?;
    let phnum = usize::from(hdr.e_phnum(endian)).min(256);
    let table = core.bytes(base.wrapping_add(hdr.e_phoff(endian)), phnum.checked_mul(56)?).ok()?;
    let phdrs: &[elf::ProgramHeader64<Endianness>] = object::pod::slice_from_bytes(table, phnum).ok()?.0;
    for ph in phdrs {
        if ph.p_type(endian) == elf::PT_NOTE {
            // The first PT_LOAD maps file offset 0 at `base`, and note segments lie inside it.
            let data = core.bytes(base.wrapping_add(ph.p_offset(endian)), usize::try_from(ph.p_filesz(endian)).ok()?.min(4096)).ok()?;
            let notes = object::read::elf::NoteIterator::new(endian, ph.p_align(endian), data).ok()?;
            if let Some(id) = build_id_in(notes, endian) {
                return Some(id);
            }
        }
    }
    None
}

/// The symbol's address from the file on disk, when its build id equals the core's.
fn symbol_in_file(core: &Core<'_>, path: &str, base: u64, name: &str) -> Option<u64> {
    let want = build_id_in_core(core, base)?;
    let bytes = crate::base::fs::read_regular(std::path::Path::new(path), 512 << 20).ok()?;
    let file = object::read::elf::ElfFile64::<Endianness>::parse(&*bytes).ok()?;
    if file.build_id().ok()?? != want.as_slice() {
        return None;
    }
    let first = file.elf_program_headers().iter().find(|p| p.p_type(file.endian()) == elf::PT_LOAD)?;
    let bias = base.wrapping_sub(first.p_vaddr(file.endian()) & !0xFFF);
    file.dynamic_symbols().find(|s| s.name_bytes().ok() == Some(name.as_bytes())).map(|s| s.address().wrapping_add(bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_json() {
        let json = br#"{"version":0,"baseline":"empty","types":{"Thread":{"Id":16,"LinkNext":[112,"pointer"],"!":64}},"globals":{"A":["0x10","uint8"],"P":[[1],"pointer"],"S":["x64","string"],"N":7},"contracts":{"Thread":1,"StackWalk":"c2"}}"#;
        let d = Descriptor::parse_json(json, &[5, 0xABCD]).unwrap();
        assert_eq!(d.field("Thread", "Id"), Some(16));
        assert_eq!(d.field("Thread", "LinkNext"), Some(112));
        assert_eq!(d.size("Thread"), Some(64));
        assert_eq!(d.global("A"), Some(16));
        assert_eq!(d.global("P"), Some(0xABCD));
        assert_eq!(d.global("N"), Some(7));
        assert_eq!(d.string_globals.get("S").map(String::as_str), Some("x64"));
        assert_eq!(d.contract("Thread"), Some(1));
        assert_eq!(d.contract("StackWalk"), Some(2));
    }

    #[test]
    fn hash() {
        // Known value of the GNU hash for the empty string and "printf".
        assert_eq!(gnu_hash(b""), 5381);
        assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
    }
}
