//! A request's module as the service understands it (names, PDB id, MVID, PE key), its cache
//! keys, and the notes that say why its symbols were not found.

use std::sync::Arc;

use super::piece::Piece;
use super::request::{file_name, parse_debug_id, parse_guid, ModuleIn, Num};
use super::{ServiceError, MAX_NAME};
use crate::formats::pdb::WINDOWS_PDB_MESSAGE;
use crate::symbols::locate::SymbolPaths;

/// What [`Ident::head`] begins with.
const HEAD_KEY: &[u8] = b"{\"module\":";

/// One module of a request, as understood from its fields.
#[derive(Debug, Default)]
pub(super) struct Ident {
    /// The assembly's file name.
    pub(super) name: Option<String>,
    /// What every answered frame of the module begins with: `{"module":` and `name` as a JSON
    /// string (or `null`), made once per request.
    pub(super) head: Piece,
    /// The PDB's file name.
    pub(super) pdb: Option<String>,
    pub(super) guid: Option<[u8; 16]>,
    /// The PDB id's stamp (Sentry's debug_id carries it).
    pub(super) stamp: Option<u32>,
    pub(super) mvid: Option<[u8; 16]>,
    /// The SSQP PE key: TimeDateStamp, SizeOfImage.
    pub(super) pe_key: Option<(u32, u32)>,
    /// Why the module is not looked up (a name over [`MAX_NAME`] bytes).
    pub(super) bad: Option<Arc<str>>,
}

impl Ident {
    pub(super) fn from_module(m: &ModuleIn, at: usize) -> Result<Ident, ServiceError> {
        let bad = |field: &str, what: &str| ServiceError::new(400, "bad_value", format!("modules[{at}].{field}: {what}"));
        let name = m.name.clone().or_else(|| m.code_file.as_deref().map(|p| file_name(p).to_owned())).filter(|n| !n.is_empty());
        // A PDB is named by its file name alone (a path's directories are never read): only the
        // symbol paths, the cache and the servers are searched.
        let pdb = m.pdb.as_deref().or(m.debug_file.as_deref()).map(|p| file_name(p).to_owned()).filter(|n| !n.is_empty());
        let long = [("name", &name), ("pdb", &pdb)].into_iter().find_map(|(field, v)| v.as_ref().filter(|v| v.len() > MAX_NAME).map(|v| (field, v.len())));
        if let Some((field, len)) = long {
            let why = format!("modules[{at}]: its {field} is {len} bytes, over the {MAX_NAME} a file name may have; not looked up");
            return Ok(Ident { bad: Some(Arc::from(why)), ..Ident::default() });
        }
        let (guid, stamp) = match (&m.pdb_id, &m.debug_id) {
            (Some(id), _) | (None, Some(id)) => {
                let field = if m.pdb_id.is_some() { "pdb_id" } else { "debug_id" };
                let (g, s) = parse_debug_id(id)
                    .ok_or_else(|| bad(field, "not a PDB id: a GUID (dashed or 32 hex digits), optionally with an age of 1 to 8 hex digits (after a dash, or appended: 40 hex digits)"))?;
                (Some(g), s)
            }
            (None, None) => (None, None),
        };
        let mvid = match &m.mvid {
            Some(t) => Some(parse_guid(t).ok_or_else(|| bad("mvid", "not a GUID"))?),
            None => None,
        };
        let pe_key = match (&m.code_id, m.pe_timestamp, m.pe_size_of_image) {
            (_, Some(Num(t)), Some(Num(s))) => Some((u32::try_from(t).map_err(|_| bad("pe_timestamp", "over 32 bits"))?, u32::try_from(s).map_err(|_| bad("pe_size_of_image", "over 32 bits"))?)),
            (Some(code_id), _, _) if m.kind.as_deref().is_none_or(|k| k.starts_with("pe")) => parse_code_id(code_id),
            _ => None,
        };
        let mut head = Piece::buffer(name.as_ref().map_or(4, |n| n.len().saturating_add(2)).saturating_add(HEAD_KEY.len()));
        head.extend_from_slice(HEAD_KEY);
        match &name {
            Some(name) => crate::base::json::string(&mut head, name),
            None => head.extend_from_slice(b"null"),
        }
        Ok(Ident { name, head: Piece::new(head), pdb, guid, stamp, mvid, pe_key, bad: None })
    }

    /// `name` as a JSON string, quotes included (from [`Ident::head`]).
    pub(super) fn name_json(&self) -> Option<&[u8]> {
        self.name.as_ref().and_then(|_| self.head.bytes().get(HEAD_KEY.len()..))
    }

    /// The PDB's name: as given, else the assembly's with `.pdb`.
    pub(super) fn pdb_name(&self) -> Option<String> {
        self.pdb.clone().or_else(|| {
            let name = self.name.as_deref()?;
            let stem = name.strip_suffix(".dll").or_else(|| name.strip_suffix(".exe")).or_else(|| name.strip_suffix(".DLL")).or_else(|| name.strip_suffix(".EXE")).unwrap_or(name);
            Some(format!("{stem}.pdb"))
        })
    }

    pub(super) fn pdb_key(&self) -> Option<String> {
        let hex = |g: &[u8; 16]| crate::symbols::symsrv::key::guid_n(g);
        match (&self.guid, self.pdb_name(), &self.name) {
            (Some(g), Some(p), _) => Some(format!("pdb\u{0}{}\u{0}{p}\u{0}{:?}", hex(g), self.stamp)),
            (None, _, Some(n)) => Some(format!("asm\u{0}{n}\u{0}{:?}\u{0}{:?}", self.mvid.as_ref().map(hex), self.pe_key)),
            (None, Some(p), None) => Some(format!("pdbname\u{0}{p}")),
            _ => None,
        }
    }

    pub(super) fn image_key(&self) -> Option<String> {
        let name = self.name.as_deref()?;
        Some(format!("img\u{0}{name}\u{0}{:?}\u{0}{:?}", self.mvid.as_ref().map(crate::symbols::symsrv::key::guid_n), self.pe_key))
    }
}

/// Sentry's and SSQP's PE `code_id`: the TimeDateStamp as 8 hex digits, then SizeOfImage in hex.
pub(super) fn parse_code_id(text: &str) -> Option<(u32, u32)> {
    let ts = u32::from_str_radix(text.get(..8)?, 16).ok()?;
    let size = u32::from_str_radix(text.get(8..).filter(|s| !s.is_empty() && s.len() <= 8)?, 16).ok()?;
    Some((ts, size))
}

/// What the symbol servers said about `key` (a 404, a 500, a timeout), as `; symbol server
/// URL: KEY: WHAT` each (at most 4), so a frame's error says why: looked up by key, at a cost
/// that does not grow with the number of failures.
pub(super) fn server_notes(paths: &SymbolPaths, key: Option<&crate::symbols::symsrv::Key>) -> String {
    let (Some(servers), Some(key)) = (&paths.servers, key) else { return String::new() };
    servers.notes_for(key).iter().take(4).map(|n| format!("; {n}")).collect()
}

pub(super) fn ident_note(ident: &Ident) -> String {
    let mut s = String::new();
    if let Some(m) = &ident.mvid {
        s.push_str(&format!(" with MVID {}", crate::formats::metadata::mvid_text(m)));
    }
    if let Some((t, z)) = ident.pe_key {
        s.push_str(&format!(" with PE key {t:08X}{z:x}"));
    }
    s
}

/// Why a module's PDB was not found, when a Windows PDB stood where it was looked for (a file in
/// a symbol path, or what a symbol server sent): Sentry's words, then where.
pub(super) fn windows_pdb_note(passed: &[crate::symbols::locate::PassedOver], paths: &SymbolPaths, key: Option<&crate::symbols::symsrv::Key>) -> Option<String> {
    if let Some(p) = passed.iter().find(|p| p.windows_pdb) {
        return Some(format!("{WINDOWS_PDB_MESSAGE}: {} is a Windows (MSF) PDB", p.path.display()));
    }
    let (Some(servers), Some(key)) = (&paths.servers, key) else { return None };
    servers.notes_for(key).into_iter().find(|n| n.contains(WINDOWS_PDB_MESSAGE)).map(|n| format!("{WINDOWS_PDB_MESSAGE}: {n}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn code_ids_are_stamp_then_size() {
        assert_eq!(super::parse_code_id("542D574232000"), Some((0x542d_5742, 0x32000)));
    }
}
