//! The table stream `#~` / `#-` (ECMA-335 II.24.2.6): row counts, column widths, row access.

use super::schema::{columns, Column, TABLE_COUNT};
use crate::base::read::{Error, ErrorKind, Reader, Result};

/// The largest number of columns in any table (Assembly, AssemblyRef).
const MAX_COLUMNS: usize = 9;

fn bad(at: u64, expected: &'static str) -> Error {
    Error::new(ErrorKind::BadMetadata, at, expected)
}

/// A 2- or 4-byte index.
const fn width(wide: bool) -> u8 {
    if wide {
        4
    } else {
        2
    }
}

/// Where one table lives and how its rows are laid out.
#[derive(Clone, Copy, Debug, Default)]
struct Layout {
    rows: u32,
    row_size: u32,
    /// How many of `columns` the table has; the rest are unused slots.
    count: u8,
    /// (offset in row, width) of each column.
    columns: [(u8, u8); MAX_COLUMNS],
}

/// The parsed table stream.
#[derive(Clone, Debug)]
pub struct Tables<'a> {
    layouts: [Layout; TABLE_COUNT],
    data: [Reader<'a>; TABLE_COUNT],
}

/// One table: `rows` rows of `row_size` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    data: Reader<'a>,
    layout: Layout,
}

/// One row: its columns, each read as a `u32` (2- and 4-byte columns alike).
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    bytes: &'a [u8],
    /// Absolute offset of the row's first byte, so a bad column names where the row is.
    at: u64,
    layout: Layout,
}

impl<'a> Tables<'a> {
    /// Parse the table stream header and lay out every present table.
    pub fn parse(stream: Reader<'a>) -> Result<Self> {
        Self::parse_with_external(stream, None)
    }

    /// Parse a table stream whose index widths into type-system tables (0x00-0x2F) come from
    /// another module's row counts: a portable PDB's `#~` holds only the debug tables, and its
    /// `#Pdb` stream gives the row counts of the assembly's tables that the debug tables index
    /// (PortablePdb-Metadata.md, "#Pdb stream": TypeSystemTableRows).
    pub fn parse_with_external(stream: Reader<'a>, external: Option<&[u32; TABLE_COUNT]>) -> Result<Self> {
        let mut r = stream;
        // II.24.2.6: Reserved u32, MajorVersion u8, MinorVersion u8, HeapSizes u8, Reserved u8,
        // Valid u64, Sorted u64, Rows u32 × popcount(Valid), then the tables.
        let _reserved = r.u32("Reserved")?;
        let _major = r.u8("MajorVersion")?;
        let _minor = r.u8("MinorVersion")?;
        let heap_sizes = r.u8("HeapSizes")?;
        let _reserved2 = r.u8("Reserved")?;
        let valid_at = r.offset();
        let valid = r.u64("the Valid mask")?;
        let _sorted = r.u64("the Sorted mask")?;
        let mut rows = [0u32; TABLE_COUNT];
        for (id, slot) in rows.iter_mut().enumerate() {
            if valid & (1u64 << id) != 0 {
                // `id` < 64: a bit of the mask.
                if u8::try_from(id).ok().and_then(columns).is_none() {
                    return Err(bad(valid_at, "only tables 0x00-0x2C (ECMA-335 II.22) and 0x30-0x37 (portable PDB)"));
                }
                *slot = r.u32("a row count")?;
            }
        }
        // Bit 0x40 of HeapSizes: 4 extra bytes follow the row counts (written by EnC-era
        // compilers; SRM honours it as `HeapSizes.ExtraData`).
        if heap_sizes & 0x40 != 0 {
            r.skip(4, "extra data after the row counts")?;
        }
        let string_wide = heap_sizes & 0x01 != 0;
        let guid_wide = heap_sizes & 0x02 != 0;
        let blob_wide = heap_sizes & 0x04 != 0;
        // The row count that decides an index's width: the other module's for type-system
        // tables when this is a PDB, this stream's own otherwise.
        let width_rows: [u32; TABLE_COUNT] = match external {
            Some(ext) => core::array::from_fn(|id| if id < 0x30 { ext.get(id).copied().unwrap_or(0) } else { rows.get(id).copied().unwrap_or(0) }),
            None => rows,
        };
        let table_wide = |id: u8| width_rows.get(id as usize).is_some_and(|&n| n > 0xFFFF);
        let mut layouts = [Layout::default(); TABLE_COUNT];
        let mut data = [Reader::default(); TABLE_COUNT];
        for id in 0..TABLE_COUNT {
            let Some(cols) = u8::try_from(id).ok().and_then(columns) else { continue };
            let mut layout = Layout { rows: rows.get(id).copied().unwrap_or(0), ..Layout::default() };
            let mut size = 0u8;
            layout.count = u8::try_from(cols.len().min(MAX_COLUMNS)).unwrap_or(u8::MAX);
            for (slot, col) in layout.columns.iter_mut().zip(cols) {
                let width = match *col {
                    Column::Fixed(w) => w,
                    Column::String => width(string_wide),
                    Column::Guid => width(guid_wide),
                    Column::Blob => width(blob_wide),
                    Column::Table(t) => width(table_wide(t)),
                    Column::Coded(c) => {
                        // II.24.2.6: 2 bytes if every named table has fewer than 2^(16 - tag bits) rows.
                        let limit = 1u32 << 16u32.saturating_sub(c.tag_bits());
                        let wide = c.tables().iter().flatten().any(|&t| width_rows.get(t as usize).is_some_and(|&n| n >= limit));
                        width(wide)
                    }
                };
                *slot = (size, width);
                size = size.saturating_add(width);
            }
            layout.row_size = u32::from(size);
            let at = r.offset();
            let total = u64::from(layout.rows).saturating_mul(u64::from(layout.row_size));
            let Some(total) = usize::try_from(total).ok().filter(|&t| t <= r.len()) else {
                return Err(bad(at, "tables that fit in the table stream"));
            };
            if let (Some(l), Some(d)) = (layouts.get_mut(id), data.get_mut(id)) {
                *d = r.split(total, "a table")?;
                *l = layout;
            }
        }
        Ok(Tables { layouts, data })
    }

    /// Row count of table `id` (0 for absent tables).
    pub fn rows(&self, id: u8) -> u32 {
        self.layouts.get(id as usize).map_or(0, |l| l.rows)
    }

    /// Table `id`.
    pub fn table(&self, id: u8) -> Table<'a> {
        Table { data: self.data.get(id as usize).copied().unwrap_or_default(), layout: self.layouts.get(id as usize).copied().unwrap_or_default() }
    }

    /// Row `rid` (1-based) of table `id`.
    pub fn row(&self, id: u8, rid: u32) -> Result<Row<'a>> {
        self.table(id).row(rid)
    }
}

impl<'a> Table<'a> {
    /// Number of rows.
    pub fn len(&self) -> u32 {
        self.layout.rows
    }

    /// True when the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.layout.rows == 0
    }

    /// Bytes per row.
    pub fn row_size(&self) -> u32 {
        self.layout.row_size
    }

    /// Row `rid`, 1-based as in tokens; `not_found` outside 1..=len.
    pub fn row(&self, rid: u32) -> Result<Row<'a>> {
        if rid == 0 || rid > self.layout.rows {
            return Err(Error::nowhere(ErrorKind::NotFound, "a row number inside the table"));
        }
        let mut r = self.data;
        let size = self.layout.row_size as usize;
        r.skip((rid as usize).saturating_sub(1).saturating_mul(size), "a row")?;
        let at = r.offset();
        Ok(Row { bytes: r.bytes(size, "a row")?, at, layout: self.layout })
    }

    /// Every row, in order.
    pub fn iter(&self) -> impl Iterator<Item = Row<'a>> + 'a {
        let layout = self.layout;
        let start = self.data.offset();
        let size = (layout.row_size as usize).max(1);
        self.data.as_slice().chunks_exact(size).enumerate().map(move |(i, bytes)| {
            let at = start.saturating_add((i as u64).saturating_mul(size as u64));
            Row { bytes, at, layout }
        })
    }
}

impl Row<'_> {
    /// Absolute offset of the row's first byte.
    pub fn offset(&self) -> u64 {
        self.at
    }

    /// Column `i` as a `u32` (2- and 4-byte columns alike).
    ///
    /// A column the table does not have is `not_found` at the row's offset: a caller that asks
    /// for one has the wrong table in hand, and a silent 0 would read as a null index, which
    /// is a legal value in most columns and so would hide the mistake.
    pub fn get(&self, i: usize) -> Result<u32> {
        let column = if i < usize::from(self.layout.count) { self.layout.columns.get(i) } else { None };
        let Some(&(offset, width)) = column else {
            return Err(Error::new(ErrorKind::NotFound, self.at, "a column the table has"));
        };
        let start = offset as usize;
        match (width, self.bytes.get(start..start.saturating_add(width as usize))) {
            (2, Some(&[a, b])) => Ok(u32::from(u16::from_le_bytes([a, b]))),
            (4, Some(&[a, b, c, d])) => Ok(u32::from_le_bytes([a, b, c, d])),
            // The layout gives every column 2 or 4 bytes inside `row_size`, and a row holds
            // exactly `row_size` bytes; this arm is for a layout that breaks that rule.
            _ => Err(Error::new(ErrorKind::BadMetadata, self.at.saturating_add(offset.into()), "a column inside its row")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table stream holding one Module row (II.22.30: Generation u16, Name, Mvid, EncId,
    /// EncBaseId; 10 bytes with narrow heaps), placed at absolute offset 100.
    fn one_module_row() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(&0u32.to_le_bytes()); // Reserved
        s.extend_from_slice(&[2, 0, 0, 1]); // MajorVersion, MinorVersion, HeapSizes, Reserved
        s.extend_from_slice(&1u64.to_le_bytes()); // Valid: Module only
        s.extend_from_slice(&0u64.to_le_bytes()); // Sorted
        s.extend_from_slice(&1u32.to_le_bytes()); // Module's row count
        s.extend_from_slice(&[7, 0, 1, 0, 2, 0, 0, 0, 0, 0]);
        s
    }

    #[test]
    fn a_column_the_table_lacks_is_not_found_at_the_row() {
        let bytes = one_module_row();
        let tables = Tables::parse(Reader::new(&bytes, 100)).unwrap();
        let row = tables.row(0, 1).unwrap();
        let row_at = 100 + 24 + 4;
        assert_eq!(row.offset(), row_at);
        assert_eq!((row.get(0), row.get(1), row.get(2), row.get(4)), (Ok(7), Ok(1), Ok(2), Ok(0)));
        // Module has 5 columns: the 6th, and the last slot of the widest table, are errors.
        for i in [5, MAX_COLUMNS - 1, MAX_COLUMNS, usize::MAX] {
            assert_eq!(row.get(i), Err(Error::new(ErrorKind::NotFound, row_at, "a column the table has")), "column {i}");
        }
        // Rows from the iterator know where they are too.
        assert_eq!(tables.table(0).iter().map(|r| r.offset()).collect::<Vec<_>>(), [row_at]);
    }

    #[test]
    fn a_row_outside_the_table_is_not_found() {
        let bytes = one_module_row();
        let tables = Tables::parse(Reader::new(&bytes, 0)).unwrap();
        for rid in [0, 2, u32::MAX] {
            assert_eq!(tables.row(0, rid).map(|_| ()).unwrap_err().kind, ErrorKind::NotFound);
        }
        // An absent table has no rows at all.
        assert_eq!(tables.row(0x02, 1).map(|_| ()).unwrap_err().kind, ErrorKind::NotFound);
    }
}
