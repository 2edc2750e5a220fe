//! The request model of `POST /symbolicate` (docs/output.md#the-service, docs/service.md): what clients send,
//! as lenient as the agents that send it. Numbers may be JSON numbers or strings (`"0x1a"`, as
//! Sentry writes `instruction_addr` and `function_id`, or decimal); unknown fields are ignored,
//! so a Sentry frame or debug image can be passed on as is.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A body: modules and frames, or Sentry symbolicator's `stacktraces` of frames.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Request {
    /// The modules frames refer to by index (`images` and Sentry's `debug_meta.images` too).
    #[serde(default, alias = "images")]
    pub modules: Option<Modules>,
    /// Sentry's event form: `{"debug_meta":{"images":[...]}}`.
    #[serde(default)]
    pub debug_meta: Option<DebugMeta>,
    /// The frames, answered in order.
    #[serde(default)]
    pub frames: Option<Frames>,
    /// Symbolicator's form: `{"stacktraces":[{"frames":[...]}]}`, answered in the same shape.
    #[serde(default)]
    pub stacktraces: Option<Vec<StacktraceIn>>,
    /// How many context lines on each side of a frame's line (0: none; at most 20; default 5).
    #[serde(default)]
    pub context_lines: Option<Num>,
}

/// The frame lists a request answers, and whether they are nested (`stacktraces`).
pub(crate) type Lists<T> = Option<(Vec<Vec<T>>, bool)>;

/// The service's rule for a request's parts, whichever reader read them: its modules are
/// `modules` (or `images`), else `debug_meta.images`; its frame lists are `frames`, else each of
/// `stacktraces` (nested; a trace without frames is an empty list); no lists when it has neither.
pub(crate) fn chosen<T>(modules: Option<Vec<ModuleIn>>, images: Option<Vec<ModuleIn>>, frames: Option<Vec<T>>, traces: Option<Vec<Option<Vec<T>>>>) -> (Vec<ModuleIn>, Lists<T>) {
    let lists = match (frames, traces) {
        (Some(frames), _) => Some((vec![frames], false)),
        (None, Some(traces)) => Some((traces.into_iter().map(Option::unwrap_or_default).collect(), true)),
        (None, None) => None,
    };
    (modules.or(images).unwrap_or_default(), lists)
}

impl Request {
    /// This request's modules and frame lists, by [`chosen`]'s rule.
    pub(crate) fn chosen(self) -> (Vec<ModuleIn>, Lists<FrameIn>) {
        let traces = self.stacktraces.map(|ts| ts.into_iter().map(|t| t.frames.map(|f| f.0)).collect());
        chosen(self.modules.map(|m| m.0), self.debug_meta.and_then(|d| d.images).map(|m| m.0), self.frames.map(|f| f.0), traces)
    }
}

/// Sentry's `debug_meta`.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DebugMeta {
    /// Its debug images.
    #[serde(default)]
    pub images: Option<Modules>,
}

/// One stack trace of symbolicator's form.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct StacktraceIn {
    /// Its frames.
    #[serde(default)]
    pub frames: Option<Frames>,
}

/// One module: docs/output.md#the-service's fields, Sentry's `pe_dotnet` debug image, the OpenTelemetry profiler's
/// mapping.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ModuleIn {
    /// The assembly's file name (`Orders.dll`).
    #[serde(default)]
    pub name: Option<String>,
    /// The PDB's file name (`Orders.pdb`).
    #[serde(default)]
    pub pdb: Option<String>,
    /// The PDB's GUID, 32 hex digits (`Guid.ToString("N")`; with dashes also accepted).
    #[serde(default)]
    pub pdb_id: Option<String>,
    /// Sentry: `pe_dotnet` (any other type is still read for the fields below).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Sentry: `GUID-stamp` (`{CodeView GUID:D}-{stamp:x}`), the PDB id.
    #[serde(default)]
    pub debug_id: Option<String>,
    /// Sentry: the PDB path as the build wrote it (its last component is the PDB's name).
    #[serde(default)]
    pub debug_file: Option<String>,
    /// Sentry: the assembly's path (its last component is the module's name).
    #[serde(default)]
    pub code_file: Option<String>,
    /// Sentry (and SSQP): the PE key, `TimeDateStamp` as 8 hex digits then `SizeOfImage` in hex.
    #[serde(default)]
    pub code_id: Option<String>,
    /// The module's MVID (what the OpenTelemetry profiler reports as the mapping's build id).
    #[serde(default, alias = "build_id")]
    pub mvid: Option<String>,
    /// The PE header's TimeDateStamp (with `pe_size_of_image`, the SSQP PE key).
    #[serde(default)]
    pub pe_timestamp: Option<Num>,
    /// The PE header's SizeOfImage.
    #[serde(default)]
    pub pe_size_of_image: Option<Num>,
}

/// One frame: clrmap's own (`module`, `token`, `il_offset`), Sentry's (`addr_mode` `rel:N`,
/// `function_id`, `instruction_addr`), or the OpenTelemetry profiler's (`address`: a JIT frame's
/// `0xf` tag, method index and IL offset, or a ReadyToRun frame's RVA).
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FrameIn {
    /// The module's index: a JSON number. A string here (as Sentry's own `module` field is, a
    /// module's name) is never an index, even one of digits, and is ignored.
    #[serde(default)]
    pub module: Option<Index>,
    /// Sentry: `rel:N`, the module's index.
    #[serde(default)]
    pub addr_mode: Option<String>,
    /// The MethodDef token.
    #[serde(default)]
    pub token: Option<Num>,
    /// Sentry: the MethodDef row (or the whole token).
    #[serde(default)]
    pub function_id: Option<Num>,
    /// The IL offset.
    #[serde(default)]
    pub il_offset: Option<Num>,
    /// Sentry: the IL offset.
    #[serde(default)]
    pub instruction_addr: Option<Num>,
    /// OpenTelemetry: the frame's address (line id) as the profiler encodes it.
    #[serde(default)]
    pub address: Option<Num>,
    /// An RVA in a ReadyToRun image.
    #[serde(default)]
    pub rva: Option<Num>,
    /// The RVA is a return address (every frame below the leaf): looked up at RVA − 1.
    #[serde(default)]
    pub return_address: Option<bool>,
}

thread_local! {
    /// How many more frames the request being parsed on this thread may hold.
    static BUDGET: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
    /// How many more modules it may hold.
    static MODULE_BUDGET: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// The most modules one request may list (each module in memory is some hundred bytes, ten
/// times what its JSON may take): more stops parsing with [`TOO_MANY_MODULES`].
pub const MAX_MODULES: usize = 10_000;

/// The message of the error a module list over [`MAX_MODULES`] stops parsing with.
pub const TOO_MANY_MODULES: &str = "clrmap: over the module limit";

/// A module list, counted as it is read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Modules(pub Vec<ModuleIn>);

struct ModulesVisitor;

impl<'de> Visitor<'de> for ModulesVisitor {
    type Value = Modules;
    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("an array of modules")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Modules, A::Error> {
        let mut out = Vec::new();
        while let Some(module) = seq.next_element::<ModuleIn>()? {
            let left = MODULE_BUDGET.with(|b| b.get());
            let Some(left) = left.checked_sub(1) else { return Err(de::Error::custom(TOO_MANY_MODULES)) };
            MODULE_BUDGET.with(|b| b.set(left));
            out.push(module);
        }
        Ok(Modules(out))
    }
}

impl<'de> Deserialize<'de> for Modules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Modules, D::Error> {
        d.deserialize_seq(ModulesVisitor)
    }
}

/// The message of the error a frame list over its budget stops parsing with.
pub const TOO_MANY_FRAMES: &str = "clrmap: over the frame limit";

/// Run `parse` with at most `max` frames allowed in all the frame lists it reads: the list past
/// the limit stops with [`TOO_MANY_FRAMES`] at that frame, so a body of a million frames costs
/// the memory of `max`, not of a million.
pub fn with_frame_budget<T>(max: usize, parse: impl FnOnce() -> T) -> T {
    BUDGET.with(|b| b.set(max));
    MODULE_BUDGET.with(|b| b.set(MAX_MODULES));
    let r = parse();
    BUDGET.with(|b| b.set(usize::MAX));
    MODULE_BUDGET.with(|b| b.set(usize::MAX));
    r
}

/// A frame list, counted against the thread's budget as it is read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Frames(pub Vec<FrameIn>);

struct FramesVisitor;

impl<'de> Visitor<'de> for FramesVisitor {
    type Value = Frames;
    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("an array of frames")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Frames, A::Error> {
        let mut out = Vec::new();
        while let Some(frame) = seq.next_element::<FrameIn>()? {
            let left = BUDGET.with(|b| b.get());
            let Some(left) = left.checked_sub(1) else { return Err(de::Error::custom(TOO_MANY_FRAMES)) };
            BUDGET.with(|b| b.set(left));
            out.push(frame);
        }
        Ok(Frames(out))
    }
}

impl<'de> Deserialize<'de> for Frames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Frames, D::Error> {
        d.deserialize_seq(FramesVisitor)
    }
}

/// A non-negative integer, from a JSON number or a string (`0x..` hex, or decimal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Num(pub u64);

/// A module index, or nothing where the field holds something else (Sentry's `module` string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Index(pub Option<u64>);

/// Parse `0x..` hex or decimal.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u64::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None => s.parse().ok(),
    }
}

struct NumVisitor;

impl Visitor<'_> for NumVisitor {
    type Value = Num;
    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a non-negative integer, or a string of one (0x.. hex or decimal)")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
        Ok(Num(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
        u64::try_from(v).map(Num).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
        parse_num(v).map(Num).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        d.deserialize_any(NumVisitor)
    }
}

struct IndexVisitor;

impl<'de> Visitor<'de> for IndexVisitor {
    type Value = Index;
    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a module index")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Index, E> {
        Ok(Index(Some(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Index, E> {
        u64::try_from(v).map(|v| Index(Some(v))).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Index, E> {
        Ok(Index(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Index, E> {
        Ok(Index(None))
    }
}

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Index, D::Error> {
        d.deserialize_any(IndexVisitor)
    }
}

/// A GUID from 32 hex digits in `Guid.ToString("N")` order, or the dashed `D` form (braces
/// allowed around it): its bytes in GUID byte order (Data1..Data3 little-endian), as a CodeView
/// entry and a PDB id hold them. [`crate::guid::Guid::parse`]'s rule.
pub fn parse_guid(text: &str) -> Option<[u8; 16]> {
    crate::base::guid::Guid::parse(text).map(|g| g.0)
}

/// A PDB id as Sentry and SSQP write it, in any case: the GUID dashed (`0c1033f7-8632-492e-91c6-c314b72e1920`,
/// braces allowed) or compact (32 hex digits), then optionally an age: after a `-` (`-1`,
/// `-e60b819d`) or, in the compact form, appended directly (`...1920e60b819d`, 40 digits; SSQP's
/// and breakpad's form). The age is 1 to 8 hex digits; for a portable PDB it is the id's stamp.
/// The GUID's bytes (GUID byte order) and the age when given.
pub fn parse_debug_id(text: &str) -> Option<([u8; 16], Option<u32>)> {
    let text = text.trim();
    let text = match text.strip_prefix('{') {
        Some(rest) => rest.replacen('}', "", 1),
        None => text.to_owned(),
    };
    let dashed = text.len() >= 36 && [8usize, 13, 18, 23].iter().all(|&i| text.as_bytes().get(i) == Some(&b'-'));
    let cut = if dashed { 36 } else { text.len().min(32) };
    let (guid, rest) = (text.get(..cut)?, text.get(cut..)?);
    let age = rest.strip_prefix('-').unwrap_or(rest);
    // The GUID itself has no dashes in the compact form, and the dashed one has exactly four.
    if (!dashed && guid.contains('-')) || (rest.starts_with('-') && age.is_empty()) {
        return None;
    }
    let age = match age {
        "" => None,
        a if a.len() <= 8 && a.bytes().all(|b| b.is_ascii_hexdigit()) => Some(u32::from_str_radix(a, 16).ok()?),
        _ => return None,
    };
    Some((parse_guid(guid)?, age))
}

/// The last component of a path written on any system.
pub fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_as_numbers_or_strings() {
        let f: FrameIn = serde_json::from_str(r#"{"module":"System.Foo","function_id":"0x2","instruction_addr":"0x1a","addr_mode":"rel:1"}"#).unwrap();
        assert_eq!(f.module, Some(Index(None)));
        assert_eq!(f.function_id, Some(Num(2)));
        assert_eq!(f.instruction_addr, Some(Num(0x1a)));
        // A string of digits is not an index either.
        let f: FrameIn = serde_json::from_str(r#"{"module":"1"}"#).unwrap();
        assert_eq!(f.module, Some(Index(None)));
        assert!(serde_json::from_str::<FrameIn>(r#"{"token":-1}"#).is_err());
        assert!(serde_json::from_str::<FrameIn>(r#"{"token":"0x"}"#).is_err());
        assert!(serde_json::from_str::<FrameIn>(r#"{"token":1.5}"#).is_err());
    }

    #[test]
    fn guids_in_n_and_d_forms_and_sentry_debug_ids() {
        let bytes = [0xf6, 0x72, 0x7b, 0x49, 0x0a, 0x39, 0xfc, 0x44, 0x87, 0x8e, 0x5a, 0x2d, 0x63, 0xb6, 0xcc, 0x4b];
        assert_eq!(parse_guid("497b72f6390a44fc878e5a2d63b6cc4b"), Some(bytes));
        assert_eq!(crate::symbols::symsrv::key::guid_n(&bytes), "497b72f6390a44fc878e5a2d63b6cc4b");
        assert_eq!(parse_debug_id("497b72f6-390a-44fc-878e-5a2d63b6cc4b-c0b21b72"), Some((bytes, Some(0xc0b2_1b72))));
        assert_eq!(parse_debug_id("497B72F6-390A-44FC-878E-5A2D63B6CC4B"), Some((bytes, None)));
        // Every form Sentry and SSQP use: compact 32 and 40 digits, an age suffix, any case.
        let sentry = [0xf7, 0x33, 0x10, 0x0c, 0x32, 0x86, 0x2e, 0x49, 0x91, 0xc6, 0xc3, 0x14, 0xb7, 0x2e, 0x19, 0x20];
        for (text, want) in [
            ("0c1033f78632492e91c6c314b72e1920e60b819d", Some(0xe60b_819d)),
            ("0C1033F78632492E91C6C314B72E1920E60B819D", Some(0xe60b_819d)),
            ("0c1033f78632492e91c6c314b72e1920", None),
            ("0c1033f78632492e91c6c314b72e19201", Some(1)),
            ("0c1033f78632492e91c6c314b72e1920-1", Some(1)),
            ("0c1033f7-8632-492e-91c6-c314b72e1920", None),
            ("0c1033f7-8632-492e-91c6-c314b72e1920-1", Some(1)),
            ("0c1033f7-8632-492e-91c6-c314b72e1920-e60b819d", Some(0xe60b_819d)),
            ("{0C1033F7-8632-492E-91C6-C314B72E1920}", None),
            ("{0C1033F7-8632-492E-91C6-C314B72E1920}-E60B819D", Some(0xe60b_819d)),
        ] {
            assert_eq!(parse_debug_id(text), Some((sentry, want)), "{text}");
        }
        for bad in [
            "0c1033f78632492e91c6c314b72e1920e60b819d0",
            "0c1033f7-8632-492e-91c6-c314b72e1920-",
            "0c1033f7-8632-492e-91c6-c314b72e1920e60b819dx",
            "0c1033f78632492e91c6c314b72e192",
            "0c10-33f78632492e91c6c314b72e1920",
            "",
        ] {
            assert_eq!(parse_debug_id(bad), None, "{bad}");
        }
        assert_eq!(parse_guid("497b72f6390a44fc878e5a2d63b6cc4"), None);
        assert_eq!(parse_guid("497b72f6390a44fc878e5a2d63b6cc4g"), None);
    }
}
