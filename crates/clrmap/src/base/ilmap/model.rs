//! The public shapes of an IL-to-native map (cordebug.idl / corprof.idl) and of a code body.

use core::fmt;

/// `COR_DEBUG_IL_TO_NATIVE_MAP` (cordebug.idl, corprof.idl): three `ULONG32`, 12 bytes, no padding.
/// `il_offset` holds either a real IL offset or a [`CorDebugIlToNativeMappingTypes`] value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CorDebugIlToNativeMap {
    /// IL offset, or NO_MAPPING (-1), PROLOG (-2), EPILOG (-3) as unsigned.
    pub il_offset: u32,
    /// First native byte of the range, relative to the code start.
    pub native_start_offset: u32,
    /// One past the last native byte of the range (half-open).
    pub native_end_offset: u32,
}

const _: () = assert!(core::mem::size_of::<CorDebugIlToNativeMap>() == 12);
const _: () = assert!(core::mem::align_of::<CorDebugIlToNativeMap>() == 4);

/// `CorDebugIlToNativeMappingTypes` values, as stored in the unsigned `ilOffset` field.
#[derive(Debug)]
pub struct CorDebugIlToNativeMappingTypes;

impl CorDebugIlToNativeMappingTypes {
    /// NO_MAPPING = -1.
    pub const NO_MAPPING: u32 = 0xFFFF_FFFF;
    /// PROLOG = -2.
    pub const PROLOG: u32 = 0xFFFF_FFFE;
    /// EPILOG = -3.
    pub const EPILOG: u32 = 0xFFFF_FFFD;
}

/// An IL offset that keeps the special regions distinct from real offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IlOffset {
    /// The method's prolog (`PROLOG`, -2).
    Prolog,
    /// A real IL offset.
    Il(u32),
    /// An epilog (`EPILOG`, -3).
    Epilog,
    /// Code that maps to no IL (`NO_MAPPING`, -1).
    NoMapping,
}

impl IlOffset {
    /// From the raw `ilOffset` field. Every value other than -1, -2 and -3 is a real offset.
    pub const fn from_raw(raw: u32) -> Self {
        match raw {
            CorDebugIlToNativeMappingTypes::NO_MAPPING => IlOffset::NoMapping,
            CorDebugIlToNativeMappingTypes::PROLOG => IlOffset::Prolog,
            CorDebugIlToNativeMappingTypes::EPILOG => IlOffset::Epilog,
            v => IlOffset::Il(v),
        }
    }

    /// To the raw `ilOffset` field.
    pub const fn to_raw(self) -> u32 {
        match self {
            IlOffset::NoMapping => CorDebugIlToNativeMappingTypes::NO_MAPPING,
            IlOffset::Prolog => CorDebugIlToNativeMappingTypes::PROLOG,
            IlOffset::Epilog => CorDebugIlToNativeMappingTypes::EPILOG,
            IlOffset::Il(v) => v,
        }
    }

    /// The runtime's sort rank (`MapSortIL`, debugger.h): PROLOG, IL ascending, EPILOG, NO_MAPPING.
    /// The derived `Ord` already follows it; this names the rule.
    pub fn sort_key(self) -> (u8, u32) {
        match self {
            IlOffset::Prolog => (0, 0),
            IlOffset::Il(v) => (1, v),
            IlOffset::Epilog => (2, 0),
            IlOffset::NoMapping => (3, 0),
        }
    }
}

impl fmt::Display for IlOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IlOffset::Prolog => f.write_str("PROLOG"),
            IlOffset::Epilog => f.write_str("EPILOG"),
            IlOffset::NoMapping => f.write_str("NO_MAPPING"),
            IlOffset::Il(v) => write!(f, "{v}"),
        }
    }
}

/// docs/output.md#il-to-native-maps: `il` is a number, or one of the strings `PROLOG`, `EPILOG`, `NO_MAPPING`.
#[cfg(feature = "serde")]
impl serde::Serialize for IlOffset {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IlOffset::Il(v) => s.serialize_u32(*v),
            IlOffset::Prolog => s.serialize_str("PROLOG"),
            IlOffset::Epilog => s.serialize_str("EPILOG"),
            IlOffset::NoMapping => s.serialize_str("NO_MAPPING"),
        }
    }
}

/// `ICorDebugInfo::SourceTypes` (cordebuginfo.h): flags on a raw bounds entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SourceTypes(pub u32);

impl SourceTypes {
    /// SOURCE_TYPE_INVALID: nothing else applies.
    pub const SOURCE_TYPE_INVALID: u32 = 0x00;
    /// SEQUENCE_POINT: a debugger-requested boundary.
    pub const SEQUENCE_POINT: u32 = 0x01;
    /// STACK_EMPTY: the IL evaluation stack is empty here.
    pub const STACK_EMPTY: u32 = 0x02;
    /// CALL_SITE: a call site.
    pub const CALL_SITE: u32 = 0x04;
    /// NATIVE_END_OFFSET_UNKNOWN: internal to the debugger, never stored.
    pub const NATIVE_END_OFFSET_UNKNOWN: u32 = 0x08;
    /// CALL_INSTRUCTION: the native instruction of a call.
    pub const CALL_INSTRUCTION: u32 = 0x10;
    /// ASYNC: runtime-async suspension point (newest runtimes).
    pub const ASYNC: u32 = 0x20;

    /// True if CALL_INSTRUCTION is set.
    pub const fn is_call_instruction(self) -> bool {
        self.0 & Self::CALL_INSTRUCTION != 0
    }
}

/// A raw bounds entry (`ICorDebugInfo::OffsetMapping`): as the JIT reports it and as debug info
/// stores it, in native order, before the runtime turns it into the public map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bound {
    /// Native offset from the code start.
    pub native_offset: u32,
    /// IL offset (or a special value).
    pub il_offset: IlOffset,
    /// Source flags.
    pub source: SourceTypes,
}

/// One entry of a public map, in the form of docs/output.md#il-to-native-maps's JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MapEntry {
    /// The IL offset.
    pub il: IlOffset,
    /// Range start (native offset from the code start).
    pub native_start: u32,
    /// Range end (exclusive).
    pub native_end: u32,
}

impl From<CorDebugIlToNativeMap> for MapEntry {
    fn from(m: CorDebugIlToNativeMap) -> Self {
        MapEntry { il: IlOffset::from_raw(m.il_offset), native_start: m.native_start_offset, native_end: m.native_end_offset }
    }
}

impl From<MapEntry> for CorDebugIlToNativeMap {
    fn from(m: MapEntry) -> Self {
        CorDebugIlToNativeMap { il_offset: m.il.to_raw(), native_start_offset: m.native_start, native_end_offset: m.native_end }
    }
}

/// Where a body's code came from: one vocabulary for images, traces and captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "lowercase"))]
pub enum CodeKind {
    /// Precompiled ReadyToRun code, from the module's image.
    R2r,
    /// Code the JIT produced in the process.
    Jit,
}

impl CodeKind {
    /// `r2r` or `jit`, as in JSON and in captures.
    pub fn as_str(self) -> &'static str {
        match self {
            CodeKind::R2r => "r2r",
            CodeKind::Jit => "jit",
        }
    }

    /// A trace's MethodFlags (ClrEtwAll.man MethodFlagsMap): bit 0x8 is "Jitted"; a method load
    /// without it is precompiled code.
    pub fn from_method_flags(flags: u32) -> CodeKind {
        if flags & 0x8 != 0 {
            CodeKind::Jit
        } else {
            CodeKind::R2r
        }
    }
}

impl fmt::Display for CodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A jitted body's optimization tier, as the runtime reports it in a trace's MethodFlags bits
/// 7-9 (ClrEtwAll.man; the runtime's JitOptimizationTier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "kebab-case"))]
pub enum Tier {
    /// 1: MinOptJitted (optimization disabled).
    Minopt,
    /// 2: Optimized (not tiered: fully optimized at once).
    Optimized,
    /// 3: QuickJitted (tier 0).
    Tier0,
    /// 4: OptimizedTier1.
    Tier1,
    /// 5: OptimizedTier1OSR (on-stack replacement of a hot loop).
    Tier1Osr,
    /// 6: QuickJittedInstrumented.
    TierInstrumented,
    /// 7: OptimizedTier1Instrumented.
    Tier1Instrumented,
}

impl Tier {
    /// From MethodFlags; `None` for 0 (unknown, and precompiled code).
    pub fn from_method_flags(flags: u32) -> Option<Tier> {
        Some(match (flags >> 7) & 7 {
            1 => Tier::Minopt,
            2 => Tier::Optimized,
            3 => Tier::Tier0,
            4 => Tier::Tier1,
            5 => Tier::Tier1Osr,
            6 => Tier::TierInstrumented,
            7 => Tier::Tier1Instrumented,
            _ => return None,
        })
    }

    /// The JSON and text name: `minopt`, `optimized`, `tier0`, `tier1`, `tier1-osr`,
    /// `tier-instrumented`, `tier1-instrumented`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Minopt => "minopt",
            Tier::Optimized => "optimized",
            Tier::Tier0 => "tier0",
            Tier::Tier1 => "tier1",
            Tier::Tier1Osr => "tier1-osr",
            Tier::TierInstrumented => "tier-instrumented",
            Tier::Tier1Instrumented => "tier1-instrumented",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One native code body and its public IL-to-native map: what every source (ReadyToRun image,
/// trace, live capture) produces, and what `clrmap il dump --json` prints (docs/output.md#il-to-native-maps).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CodeBody {
    /// The MethodDef token.
    pub token: u32,
    /// The body's code start RVA within its module (for an R2R body: the entry RUNTIME_FUNCTION's
    /// BeginAddress). `None` for jitted code, which has no RVA.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub rva: Option<u32>,
    /// Code size in bytes (what GetCodeInfo2 reports for the body).
    pub code_size: u32,
    /// `Ns.Type::Method`, when names are known.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub name: Option<String>,
    /// The module's file name (traces and captures), e.g. `System.Private.CoreLib.dll`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub module: Option<String>,
    /// The module's full path as the runtime reported it (traces and captures): where its
    /// metadata and PDB are looked for. Not part of the JSON contract.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub module_path: Option<String>,
    /// The runtime's FunctionID (= a trace's MethodID), for traces and captures.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub function_id: Option<u64>,
    /// The body's absolute code start address, for traces and captures.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub start: Option<u64>,
    /// The process that ran it, for captures (several processes can share one capture).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub pid: Option<u32>,
    /// The public map, exactly as `GetILToNativeMapping3(start)` returns it.
    pub map: Vec<MapEntry>,
    /// The name with the parameter types, which tells overloads apart:
    /// `System.Collections.Generic.List`1::Add(!0)` (the notation of docs/output.md#type-signatures; for a trace, the
    /// runtime's own rendering). After `map`, so the fields of docs/output.md#il-to-native-maps keep their order.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub full_name: Option<String>,
    /// Precompiled or jitted, where the source says (images: always `r2r`). After `map` and
    /// `full_name`, so the fields of docs/output.md#il-to-native-maps keep their order.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub kind: Option<CodeKind>,
    /// A jitted body's tier, where the source knows it (traces; a capture does not).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub tier: Option<Tier>,
    /// A jitted body's index among its method's code versions (captures:
    /// `GetNativeCodeStartAddresses` order, 0 first).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub version: Option<u32>,
    /// For an instantiation compiled into a ReadyToRun image (section 109): the file offset of
    /// its method signature, which holds the type's and the method's arguments
    /// ([`crate::formats::r2r::instantiation_name`]). Not part of the JSON contract.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub signature: Option<u64>,
}
