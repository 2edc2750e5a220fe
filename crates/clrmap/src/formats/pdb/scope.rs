//! LocalScope and LocalVariable (PortablePdb-Metadata.md, "LocalScope Table" and
//! "LocalVariable Table"): the names of a method's locals, by slot index and IL range.
//!
//! LocalScope rows are sorted by Method, then by StartOffset. A scope's variables are the
//! LocalVariable rows from its VariableList to the next scope row's VariableList (or the table's
//! end), as for every ECMA-335 list column (II.22).

use std::collections::HashMap;

use super::PortablePdb;
use crate::base::read::{Error, ErrorKind, Result};
use crate::formats::metadata::table;

/// The most bytes of local names [`PortablePdb::local_scopes`] gives for one method (names shared
/// by many LocalVariable rows count once per row).
pub const MAX_LOCAL_NAME_BYTES: usize = 16 << 20;

/// One local variable: its slot in the method's local signature, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalVariable {
    /// The slot (`Index`).
    pub index: u16,
    /// `Attributes` (0x1: DebuggerHidden, a compiler-generated local).
    pub attributes: u16,
    /// The name.
    pub name: String,
}

/// One lexical scope of a method: the IL range where its variables are alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalScope {
    /// First IL offset of the scope.
    pub start_offset: u32,
    /// Length of the scope in IL bytes.
    pub length: u32,
    /// Its variables.
    pub variables: Vec<LocalVariable>,
}

impl PortablePdb<'_> {
    /// The local scopes of a method (MethodDef token), in row order. Empty when the PDB has none.
    pub fn local_scopes(&self, method: u32) -> Result<Vec<LocalScope>> {
        let scopes = self.tables().table(table::LOCAL_SCOPE);
        let variables = self.tables().table(table::LOCAL_VARIABLE);
        let rid = method & 0x00FF_FFFF;
        // Rows are sorted by Method: find the first with a binary search over row numbers.
        let (mut lo, mut hi) = (1u32, scopes.len().saturating_add(1));
        while lo < hi {
            let mid = lo.saturating_add(hi.saturating_sub(lo) >> 1);
            if scopes.row(mid)?.get(0)? < rid {
                lo = mid.saturating_add(1);
            } else {
                hi = mid;
            }
        }
        let mut out = Vec::new();
        // Names are looked up once per #Strings index (a long name shared by many rows is read
        // once), and the bytes of names one method gets are bounded.
        let mut names: HashMap<u32, &str> = HashMap::new();
        let mut left = MAX_LOCAL_NAME_BYTES;
        let mut row_id = lo;
        while row_id <= scopes.len() {
            let row = scopes.row(row_id)?;
            if row.get(0)? != rid {
                break;
            }
            let first = row.get(2)?;
            let end = match scopes.row(row_id.saturating_add(1)) {
                Ok(next) => next.get(2)?,
                Err(_) => variables.len().saturating_add(1),
            };
            if first == 0 || first > end || end > variables.len().saturating_add(1) {
                return Err(Error::new(ErrorKind::BadPdb, 0, "a LocalScope variable list inside the LocalVariable table"));
            }
            let mut vars = Vec::with_capacity(end.saturating_sub(first) as usize);
            for v in first..end {
                let var = variables.row(v)?;
                let index = var.get(2)?;
                let name = match names.get(&index) {
                    Some(name) => *name,
                    None => {
                        let name = self.strings().get(index).map_err(|e| e.with_kind(ErrorKind::BadPdb))?;
                        names.insert(index, name);
                        name
                    }
                };
                left = left.checked_sub(name.len()).ok_or(Error::new(ErrorKind::BadPdb, var.offset(), "local names of at most 16 MiB per method"))?;
                // Attributes and Index are 2-byte columns (II.22 of the portable PDB tables): they fit.
                let (index, attributes) = (u16::try_from(var.get(1)?).unwrap_or(u16::MAX), u16::try_from(var.get(0)?).unwrap_or(u16::MAX));
                vars.push(LocalVariable { index, attributes, name: name.to_owned() });
            }
            out.push(LocalScope { start_offset: row.get(4)?, length: row.get(5)?, variables: vars });
            row_id = row_id.saturating_add(1);
        }
        Ok(out)
    }
}
