//! The capture's lines as types: one definition, serialized by the profiler
//! (`crates/clrmap-profiler`) and deserialized by [`read_capture`](super::read_capture), so the
//! writer and the reader cannot drift apart. The wire form is docs/capture-format.md.

use serde::{Deserialize, Serialize};

pub use crate::formats::metadata::RtType;

/// Line 1 of each process's part of a capture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`](super::FORMAT).
    pub format: String,
    /// [`VERSION`](super::VERSION).
    pub version: u32,
    /// The process that wrote it.
    #[serde(default)]
    pub pid: u32,
    /// The COR_PRF_MONITOR mask the profiler asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_mask: Option<u32>,
    /// What `SetEventMask` answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_event_mask_hr: Option<i32>,
    /// `COR_PRF_DISABLE_ALL_NGEN_IMAGES` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_r2r: Option<bool>,
    /// The profiler was attached to a running process (`InitializeForAttach`), not loaded at
    /// start-up: ReadyToRun methods are not recorded (the runtime allows no cache-search
    /// callbacks after attach), and bodies jitted before the attach carry `before_attach`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub attach: bool,
    /// The runtime's version (GetRuntimeInformation), `major.minor.build.qfe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
    /// The runtime's version string (GetRuntimeInformation): `8.0.4`; CoreCLR before .NET 5
    /// answers `v4.0.30319`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version_string: Option<String>,
    /// The runtime library's path (`.../Microsoft.NETCore.App/3.1.23/libcoreclr.so`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_path: Option<String>,
}

/// Every line after a header: a code body, or the end of a process's recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// A jitted body (JITCompilationFinished, or enumerated at attach).
    Jit(Body),
    /// A ReadyToRun method whose code the runtime published (JITCachedFunctionSearchFinished).
    R2r(Body),
    /// The recording ended: the runtime shut down, or the profiler detached.
    End(End),
    /// The profiler's own EventPipe session for the JIT's inline trees, asked for at start-up
    /// (`clrmap profile` without `--no-inlines`, on a runtime with ICorProfilerInfo12).
    #[serde(rename = "inline_session")]
    InlineSession(InlineSession),
    /// One `JittedMethodRichDebugInfo` event (Microsoft-Windows-DotNETRuntimePrivate, id 189),
    /// its payload as the runtime wrote it.
    #[serde(rename = "rich_debug_info")]
    RichDebugInfo(InlineEvent),
    /// One `MethodDetails` event (Microsoft-Windows-DotNETRuntime, id 72), its payload as the
    /// runtime wrote it.
    #[serde(rename = "method_details")]
    MethodDetails(InlineEvent),
    /// An inlinee of a recorded tree, as the profiler asked the runtime about it
    /// (`GetFunctionInfo`): written once per method where no MethodDetails event names it (the
    /// session without the runtime provider). No payload.
    #[serde(rename = "inlinee")]
    Inlinee(InlineEvent),
    /// A module the profiler recorded code of: the PDB its image names (CodeView and PdbChecksum
    /// debug entries), written once per module path per process, before the module's first body.
    Module(ModuleRecord),
}

/// What the image of a loaded module says about its PDB, read by the profiler when it first met
/// the module (the file at the module's path, used only if its MVID is the one the runtime loaded).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleRecord {
    /// The process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The module's path, from `GetModuleInfo` (as bodies' `module`).
    #[serde(default)]
    pub module: String,
    /// The module's MVID as the runtime loaded it (as bodies' `mvid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mvid: Option<String>,
    /// The image's portable CodeView entry (`PeImage::codeview`); absent where the image names no
    /// portable PDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb: Option<PdbRecord>,
    /// The image's PdbChecksum entries (debug directory type 19), for symbol servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pdb_checksums: Vec<PdbChecksum>,
}

/// A CodeView entry: the id of the PDB an image was built with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdbRecord {
    /// The CodeView GUID, in the GUID's text form (`mvid_text` of its bytes): the first 16 bytes
    /// of the portable PDB's id.
    pub guid: String,
    /// The CodeView age.
    #[serde(default)]
    pub age: u32,
    /// The PDB path the build wrote into the image.
    #[serde(default)]
    pub path: String,
}

/// A PdbChecksum entry: the checksum of the PDB an image names, by algorithm.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdbChecksum {
    /// The algorithm's name (`SHA256`).
    pub algorithm: String,
    /// The checksum, in lowercase hexadecimal.
    pub checksum: Hex,
}

/// Whether the profiler's EventPipe session for inline trees started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineSession {
    /// The process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// What `EventPipeStartSession` answered (0: started), or `SetEventMask2` if that failed.
    #[serde(default)]
    pub hr: i32,
    /// `DOTNET_RichDebugInfo` was `1` in the process's environment (without it the runtime sends
    /// no trees, even to a session that started).
    #[serde(default)]
    pub rich_debug_info: bool,
    /// The runtime provider was on the session, so MethodDetails events name the inlinees
    /// (`method_details` records); otherwise the profiler names them (`inlinee` records).
    #[serde(default)]
    pub method_details: bool,
}

/// One runtime event's payload, recorded unchanged, with what the profiler knew about it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineEvent {
    /// The process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The event's MethodID (bytes 2..10 of a rich-debug-info payload, 0..8 of a MethodDetails
    /// payload; 0 if the payload is shorter): the method's FunctionID, as a body's `function_id`.
    #[serde(default)]
    pub method_id: u64,
    /// Rich debug info: the code start of the body the JIT had just finished on the same thread
    /// (the runtime sends the event right after the profiler's JITCompilationFinished), when
    /// that body is of this method; absent when the profiler could not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// MethodDetails: the method's module path (`GetFunctionInfo`, then `GetModuleInfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// MethodDetails: that module's MVID, as a body's `mvid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mvid: Option<String>,
    /// MethodDetails: the MethodDef token (`GetFunctionInfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u32>,
    /// The event's payload, unchanged, in lowercase hexadecimal (absent for an `inlinee`).
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub payload: Hex,
}

/// Bytes written as a lowercase hexadecimal string (two digits a byte).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hex(pub Vec<u8>);

impl Hex {
    /// No bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes of `text`, or `None` for an odd length or a character that is not a hex digit.
    pub fn decode(text: &str) -> Option<Hex> {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c.wrapping_sub(b'0')),
            b'a'..=b'f' => Some(c.wrapping_sub(b'a').wrapping_add(10)),
            b'A'..=b'F' => Some(c.wrapping_sub(b'A').wrapping_add(10)),
            _ => None,
        };
        let bytes = text.as_bytes();
        if bytes.len() % 2 != 0 {
            return None;
        }
        bytes.chunks_exact(2).map(|p| Some(digit(*p.first()?)? << 4 | digit(*p.get(1)?)?)).collect::<Option<Vec<u8>>>().map(Hex)
    }

    /// The bytes as text.
    pub fn encode(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.0.len().saturating_mul(2));
        for &b in &self.0 {
            for d in [b >> 4, b & 15] {
                if let Some(&c) = DIGITS.get(usize::from(d)) {
                    s.push(char::from(c));
                }
            }
        }
        s
    }
}

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Hex, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Hex::decode(&text).ok_or_else(|| serde::de::Error::custom("not an even number of hexadecimal digits"))
    }
}

/// One native code body and its IL-to-native map, as the runtime answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    /// The recording process (absent in old captures: the last header's).
    #[serde(default)]
    pub pid: Option<u32>,
    /// The runtime's FunctionID.
    #[serde(default)]
    pub function_id: u64,
    /// The module's path, from `GetModuleInfo`.
    #[serde(default)]
    pub module: String,
    /// The module's MVID (`GetModuleMetaData`, then `IMetaDataImport::GetScopeProps`), in the
    /// GUID's text form (`mvid_text`): the identity of the file the runtime loaded. Absent in
    /// captures written before it was recorded, and where the runtime did not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mvid: Option<String>,
    /// The MethodDef token.
    #[serde(default)]
    pub token: u32,
    /// The code start address.
    #[serde(default)]
    pub start: u64,
    /// ReadyToRun code inside its module's image: `start` minus the module base.
    #[serde(default)]
    pub rva: Option<u32>,
    /// The sum of the body's code ranges.
    #[serde(default)]
    pub code_size: u32,
    /// The body's version: the order the profiler recorded the function's bodies in (0 for the
    /// first, ReadyToRun code included). Captures written before this held a jitted body's
    /// index in `GetNativeCodeStartAddresses`, which could repeat.
    #[serde(default)]
    pub body: u32,
    /// `[ilOffset, nativeStartOffset, nativeEndOffset]` triples, raw.
    #[serde(default)]
    pub map: Vec<[u32; 3]>,
    /// Jitted code: `GetILToNativeMapping(functionId)` at the same moment.
    #[serde(default)]
    pub map1: Option<Vec<[u32; 3]>>,
    /// Enumerated at attach (`EnumJITedFunctions2`): jitted before the profiler came.
    #[serde(default, skip_serializing_if = "is_false")]
    pub before_attach: bool,
    /// The owner type's type arguments, as the runtime instantiated it (`GetClassIDInfo2` of the
    /// class `GetFunctionInfo2` answers); empty for a type that is not generic. Shared code has
    /// `System.__Canon` where a reference type goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_args: Vec<RtType>,
    /// The method's own type arguments (`GetFunctionInfo2`); empty for a method that is not generic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub method_args: Vec<RtType>,
    /// The body's `name` (`Ns.Type::Method`), as clrmap names it from the module's metadata
    /// ([`BodyNamer`](super::BodyNamer)), written by the profiler so the capture names its bodies
    /// without the assemblies at hand. Absent in captures written before names were recorded,
    /// and where the module file could not be read at the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The body's `full_name` (type arguments and parameter types, docs/output.md#type-signatures), as `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_name: Option<String>,
}

/// The end of one process's recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// The process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// `shutdown` (the runtime's Shutdown callback) or `detached` (ProfilerDetachSucceeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Record {
    /// The record as one capture line, newline included (written in one `write`).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

impl Header {
    /// The header as one capture line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
