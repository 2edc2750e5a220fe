//! The table schema of ECMA-335 II.22: every table's columns, and the coded indexes of II.24.2.6.
//!
//! Knowing every column of every table is what lets a reader skip rows of tables it does not
//! use: a row's size depends on row counts and heap sizes, so one wrong column shifts everything
//! after it.

/// Number of table ids a `#~` stream can name (the `Valid` mask is 64 bits).
pub const TABLE_COUNT: usize = 64;

/// Table ids (II.22).
#[allow(missing_docs)]
pub mod table {
    pub const MODULE: u8 = 0x00;
    pub const TYPE_REF: u8 = 0x01;
    pub const TYPE_DEF: u8 = 0x02;
    pub const FIELD_PTR: u8 = 0x03;
    pub const FIELD: u8 = 0x04;
    pub const METHOD_PTR: u8 = 0x05;
    pub const METHOD_DEF: u8 = 0x06;
    pub const PARAM_PTR: u8 = 0x07;
    pub const PARAM: u8 = 0x08;
    pub const INTERFACE_IMPL: u8 = 0x09;
    pub const MEMBER_REF: u8 = 0x0A;
    pub const CONSTANT: u8 = 0x0B;
    pub const CUSTOM_ATTRIBUTE: u8 = 0x0C;
    pub const FIELD_MARSHAL: u8 = 0x0D;
    pub const DECL_SECURITY: u8 = 0x0E;
    pub const CLASS_LAYOUT: u8 = 0x0F;
    pub const FIELD_LAYOUT: u8 = 0x10;
    pub const STAND_ALONE_SIG: u8 = 0x11;
    pub const EVENT_MAP: u8 = 0x12;
    pub const EVENT_PTR: u8 = 0x13;
    pub const EVENT: u8 = 0x14;
    pub const PROPERTY_MAP: u8 = 0x15;
    pub const PROPERTY_PTR: u8 = 0x16;
    pub const PROPERTY: u8 = 0x17;
    pub const METHOD_SEMANTICS: u8 = 0x18;
    pub const METHOD_IMPL: u8 = 0x19;
    pub const MODULE_REF: u8 = 0x1A;
    pub const TYPE_SPEC: u8 = 0x1B;
    pub const IMPL_MAP: u8 = 0x1C;
    pub const FIELD_RVA: u8 = 0x1D;
    pub const ENC_LOG: u8 = 0x1E;
    pub const ENC_MAP: u8 = 0x1F;
    pub const ASSEMBLY: u8 = 0x20;
    pub const ASSEMBLY_PROCESSOR: u8 = 0x21;
    pub const ASSEMBLY_OS: u8 = 0x22;
    pub const ASSEMBLY_REF: u8 = 0x23;
    pub const ASSEMBLY_REF_PROCESSOR: u8 = 0x24;
    pub const ASSEMBLY_REF_OS: u8 = 0x25;
    pub const FILE: u8 = 0x26;
    pub const EXPORTED_TYPE: u8 = 0x27;
    pub const MANIFEST_RESOURCE: u8 = 0x28;
    pub const NESTED_CLASS: u8 = 0x29;
    pub const GENERIC_PARAM: u8 = 0x2A;
    pub const METHOD_SPEC: u8 = 0x2B;
    pub const GENERIC_PARAM_CONSTRAINT: u8 = 0x2C;
    // Portable PDB debug tables (PortablePdb-Metadata.md).
    pub const DOCUMENT: u8 = 0x30;
    pub const METHOD_DEBUG_INFORMATION: u8 = 0x31;
    pub const LOCAL_SCOPE: u8 = 0x32;
    pub const LOCAL_VARIABLE: u8 = 0x33;
    pub const LOCAL_CONSTANT: u8 = 0x34;
    pub const IMPORT_SCOPE: u8 = 0x35;
    pub const STATE_MACHINE_METHOD: u8 = 0x36;
    pub const CUSTOM_DEBUG_INFORMATION: u8 = 0x37;
}

/// Coded index kinds (II.24.2.6): the tables each can name, in tag order. `None` marks a tag
/// value that names no table (CustomAttributeType's unused tags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Coded {
    TypeDefOrRef,
    HasConstant,
    HasCustomAttribute,
    HasFieldMarshal,
    HasDeclSecurity,
    MemberRefParent,
    HasSemantics,
    MethodDefOrRef,
    MemberForwarded,
    Implementation,
    CustomAttributeType,
    ResolutionScope,
    TypeOrMethodDef,
    /// Portable PDB: the parent of a CustomDebugInformation row.
    HasCustomDebugInformation,
}

use table::*;

impl Coded {
    /// The tables, by tag.
    pub const fn tables(self) -> &'static [Option<u8>] {
        match self {
            Coded::TypeDefOrRef => &[Some(TYPE_DEF), Some(TYPE_REF), Some(TYPE_SPEC)],
            Coded::HasConstant => &[Some(FIELD), Some(PARAM), Some(PROPERTY)],
            Coded::HasCustomAttribute => &[
                Some(METHOD_DEF),
                Some(FIELD),
                Some(TYPE_REF),
                Some(TYPE_DEF),
                Some(PARAM),
                Some(INTERFACE_IMPL),
                Some(MEMBER_REF),
                Some(MODULE),
                Some(DECL_SECURITY),
                Some(PROPERTY),
                Some(EVENT),
                Some(STAND_ALONE_SIG),
                Some(MODULE_REF),
                Some(TYPE_SPEC),
                Some(ASSEMBLY),
                Some(ASSEMBLY_REF),
                Some(FILE),
                Some(EXPORTED_TYPE),
                Some(MANIFEST_RESOURCE),
                Some(GENERIC_PARAM),
                Some(GENERIC_PARAM_CONSTRAINT),
                Some(METHOD_SPEC),
            ],
            Coded::HasFieldMarshal => &[Some(FIELD), Some(PARAM)],
            Coded::HasDeclSecurity => &[Some(TYPE_DEF), Some(METHOD_DEF), Some(ASSEMBLY)],
            Coded::MemberRefParent => &[Some(TYPE_DEF), Some(TYPE_REF), Some(MODULE_REF), Some(METHOD_DEF), Some(TYPE_SPEC)],
            Coded::HasSemantics => &[Some(EVENT), Some(PROPERTY)],
            Coded::MethodDefOrRef => &[Some(METHOD_DEF), Some(MEMBER_REF)],
            Coded::MemberForwarded => &[Some(FIELD), Some(METHOD_DEF)],
            Coded::Implementation => &[Some(FILE), Some(ASSEMBLY_REF), Some(EXPORTED_TYPE)],
            Coded::CustomAttributeType => &[None, None, Some(METHOD_DEF), Some(MEMBER_REF), None],
            Coded::ResolutionScope => &[Some(MODULE), Some(MODULE_REF), Some(ASSEMBLY_REF), Some(TYPE_REF)],
            Coded::TypeOrMethodDef => &[Some(TYPE_DEF), Some(METHOD_DEF)],
            // PortablePdb-Metadata.md, "CustomDebugInformation table": HasCustomAttribute's
            // tables, then the debug tables that can own custom debug information.
            Coded::HasCustomDebugInformation => &[
                Some(METHOD_DEF),
                Some(FIELD),
                Some(TYPE_REF),
                Some(TYPE_DEF),
                Some(PARAM),
                Some(INTERFACE_IMPL),
                Some(MEMBER_REF),
                Some(MODULE),
                Some(DECL_SECURITY),
                Some(PROPERTY),
                Some(EVENT),
                Some(STAND_ALONE_SIG),
                Some(MODULE_REF),
                Some(TYPE_SPEC),
                Some(ASSEMBLY),
                Some(ASSEMBLY_REF),
                Some(FILE),
                Some(EXPORTED_TYPE),
                Some(MANIFEST_RESOURCE),
                Some(GENERIC_PARAM),
                Some(GENERIC_PARAM_CONSTRAINT),
                Some(METHOD_SPEC),
                Some(DOCUMENT),
                Some(LOCAL_SCOPE),
                Some(LOCAL_VARIABLE),
                Some(LOCAL_CONSTANT),
                Some(IMPORT_SCOPE),
            ],
        }
    }

    /// Bits of tag: enough to number the tables (II.24.2.6).
    pub const fn tag_bits(self) -> u32 {
        match self.tables().len() {
            0..=2 => 1,
            3..=4 => 2,
            5..=8 => 3,
            9..=16 => 4,
            _ => 5,
        }
    }
}

/// One column of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// A fixed-size constant of 1, 2 or 4 bytes.
    Fixed(u8),
    /// An index into `#Strings`.
    String,
    /// An index into `#GUID`.
    Guid,
    /// An index into `#Blob`.
    Blob,
    /// A simple index into a table.
    Table(u8),
    /// A coded index.
    Coded(Coded),
}

use Column::*;

const C2: Column = Fixed(2);
const C4: Column = Fixed(4);

/// The columns of table `id` (II.22), or `None` for ids with no defined schema.
pub const fn columns(id: u8) -> Option<&'static [Column]> {
    Some(match id {
        MODULE => &[C2, String, Guid, Guid, Guid],
        TYPE_REF => &[Coded(self::Coded::ResolutionScope), String, String],
        TYPE_DEF => &[C4, String, String, Coded(self::Coded::TypeDefOrRef), Table(FIELD), Table(METHOD_DEF)],
        FIELD_PTR => &[Table(FIELD)],
        FIELD => &[C2, String, Blob],
        METHOD_PTR => &[Table(METHOD_DEF)],
        METHOD_DEF => &[C4, C2, C2, String, Blob, Table(PARAM)],
        PARAM_PTR => &[Table(PARAM)],
        PARAM => &[C2, C2, String],
        INTERFACE_IMPL => &[Table(TYPE_DEF), Coded(self::Coded::TypeDefOrRef)],
        MEMBER_REF => &[Coded(self::Coded::MemberRefParent), String, Blob],
        CONSTANT => &[C2, Coded(self::Coded::HasConstant), Blob],
        CUSTOM_ATTRIBUTE => &[Coded(self::Coded::HasCustomAttribute), Coded(self::Coded::CustomAttributeType), Blob],
        FIELD_MARSHAL => &[Coded(self::Coded::HasFieldMarshal), Blob],
        DECL_SECURITY => &[C2, Coded(self::Coded::HasDeclSecurity), Blob],
        CLASS_LAYOUT => &[C2, C4, Table(TYPE_DEF)],
        FIELD_LAYOUT => &[C4, Table(FIELD)],
        STAND_ALONE_SIG => &[Blob],
        EVENT_MAP => &[Table(TYPE_DEF), Table(EVENT)],
        EVENT_PTR => &[Table(EVENT)],
        EVENT => &[C2, String, Coded(self::Coded::TypeDefOrRef)],
        PROPERTY_MAP => &[Table(TYPE_DEF), Table(PROPERTY)],
        PROPERTY_PTR => &[Table(PROPERTY)],
        PROPERTY => &[C2, String, Blob],
        METHOD_SEMANTICS => &[C2, Table(METHOD_DEF), Coded(self::Coded::HasSemantics)],
        METHOD_IMPL => &[Table(TYPE_DEF), Coded(self::Coded::MethodDefOrRef), Coded(self::Coded::MethodDefOrRef)],
        MODULE_REF => &[String],
        TYPE_SPEC => &[Blob],
        IMPL_MAP => &[C2, Coded(self::Coded::MemberForwarded), String, Table(MODULE_REF)],
        FIELD_RVA => &[C4, Table(FIELD)],
        ENC_LOG => &[C4, C4],
        ENC_MAP => &[C4],
        ASSEMBLY => &[C4, C2, C2, C2, C2, C4, Blob, String, String],
        ASSEMBLY_PROCESSOR => &[C4],
        ASSEMBLY_OS => &[C4, C4, C4],
        ASSEMBLY_REF => &[C2, C2, C2, C2, C4, Blob, String, String, Blob],
        ASSEMBLY_REF_PROCESSOR => &[C4, Table(ASSEMBLY_REF)],
        ASSEMBLY_REF_OS => &[C4, C4, C4, Table(ASSEMBLY_REF)],
        FILE => &[C4, String, Blob],
        EXPORTED_TYPE => &[C4, C4, String, String, Coded(self::Coded::Implementation)],
        MANIFEST_RESOURCE => &[C4, C4, String, Coded(self::Coded::Implementation)],
        NESTED_CLASS => &[Table(TYPE_DEF), Table(TYPE_DEF)],
        GENERIC_PARAM => &[C2, C2, Coded(self::Coded::TypeOrMethodDef), String],
        METHOD_SPEC => &[Coded(self::Coded::MethodDefOrRef), Blob],
        GENERIC_PARAM_CONSTRAINT => &[Table(GENERIC_PARAM), Coded(self::Coded::TypeDefOrRef)],
        // Portable PDB tables (PortablePdb-Metadata.md): Document (Name, HashAlgorithm, Hash,
        // Language); MethodDebugInformation (Document, SequencePoints); LocalScope (Method,
        // ImportScope, VariableList, ConstantList, StartOffset, Length); LocalVariable (Attributes,
        // Index, Name); LocalConstant (Name, Signature); ImportScope (Parent, Imports);
        // StateMachineMethod (MoveNextMethod, KickoffMethod); CustomDebugInformation (Parent, Kind,
        // Value).
        DOCUMENT => &[Blob, Guid, Blob, Guid],
        METHOD_DEBUG_INFORMATION => &[Table(DOCUMENT), Blob],
        LOCAL_SCOPE => &[Table(METHOD_DEF), Table(IMPORT_SCOPE), Table(LOCAL_VARIABLE), Table(LOCAL_CONSTANT), C4, C4],
        LOCAL_VARIABLE => &[C2, C2, String],
        LOCAL_CONSTANT => &[String, Blob],
        IMPORT_SCOPE => &[Table(IMPORT_SCOPE), Blob],
        STATE_MACHINE_METHOD => &[Table(METHOD_DEF), Table(METHOD_DEF)],
        CUSTOM_DEBUG_INFORMATION => &[Coded(self::Coded::HasCustomDebugInformation), Guid, Blob],
        _ => return None,
    })
}
