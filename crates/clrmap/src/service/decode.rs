//! Reading `POST /symbolicate` bodies: each frame checked into what it asks, with errors that
//! name where, formatted only when there is one.

use super::answer::Ask;
use super::request::{parse_num, FrameIn, Num};
use super::ServiceError;
use crate::answers::symbolizer::FrameKind;

/// Where a frame is in the request: `frames[i]`, or `stacktraces[g].frames[i]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct At {
    pub(super) group: usize,
    pub(super) index: usize,
    pub(super) nested: bool,
}

impl core::fmt::Display for At {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.nested {
            write!(f, "stacktraces[{}].frames[{}]", self.group, self.index)
        } else {
            write!(f, "frames[{}]", self.index)
        }
    }
}

/// What a frame asks, checked against the request's modules.
pub(super) fn ask_of(f: &FrameIn, at: At, modules: usize) -> Result<(usize, Ask), ServiceError> {
    let bad = |what: String| ServiceError::new(400, "bad_value", format!("{at}{what}"));
    let module = match (f.module.and_then(|m| m.0), f.addr_mode.as_deref()) {
        (Some(m), _) => m,
        (None, Some(mode)) => mode.strip_prefix("rel:").and_then(parse_num).ok_or_else(|| bad(format!(".addr_mode: {mode:?} is not rel:N")))?,
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `module` (or `addr_mode`)"))),
    };
    let module = usize::try_from(module).ok().filter(|m| *m < modules).ok_or_else(|| bad(format!(".module: {module} names no module (the request has {modules})")))?;
    let u32_of = |n: Num, field: &str| u32::try_from(n.0).map_err(|_| bad(format!(".{field}: {} is over 32 bits", n.0)));
    if let Some(Num(address)) = f.address {
        // The OpenTelemetry eBPF profiler's line id: 0xf, 28 bits of MethodDef index and 32 bits
        // of IL offset for a jitted frame; otherwise a ReadyToRun frame's RVA.
        if address >> 60 == 0xf {
            let index = u32::try_from((address >> 32) & 0x0fff_ffff).unwrap_or(0);
            let il = u32::try_from(address & 0xffff_ffff).unwrap_or(0);
            return Ok((module, Ask::Il { token: 0x0600_0000 | index, il }));
        }
        let rva = u32_of(Num(address), "address")?;
        return Ok((module, Ask::Rva { rva, kind: rva_kind(f) }));
    }
    if let Some(rva) = f.rva {
        return Ok((module, Ask::Rva { rva: u32_of(rva, "rva")?, kind: rva_kind(f) }));
    }
    let token = match (f.token, f.function_id) {
        (Some(t), _) => u32_of(t, "token")?,
        (None, Some(id)) => {
            let id = u32_of(id, "function_id")?;
            if id >> 24 == 0 {
                0x0600_0000 | id
            } else {
                id
            }
        }
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `token` (or `function_id`, `address`, `rva`)"))),
    };
    let il = match (f.il_offset, f.instruction_addr) {
        (Some(n), _) => u32_of(n, "il_offset")?,
        (None, Some(n)) => u32_of(n, "instruction_addr")?,
        (None, None) => return Err(ServiceError::new(400, "missing_field", format!("{at}: missing field `il_offset` (or `instruction_addr`)"))),
    };
    Ok((module, Ask::Il { token, il }))
}

pub(super) fn rva_kind(f: &FrameIn) -> FrameKind {
    if f.return_address == Some(true) {
        FrameKind::ReturnAddress
    } else {
        FrameKind::Leaf
    }
}

/// A serde_json error as the service's kind: bad syntax or a cut body is `bad_json`, a field
/// missing is `missing_field`, a field of the wrong type or value is `bad_value`.
pub(super) fn json_error(e: serde_json::Error) -> ServiceError {
    use serde_json::error::Category;
    let message = e.to_string();
    let kind = match e.classify() {
        Category::Data if message.starts_with("missing field") => "missing_field",
        Category::Data => "bad_value",
        Category::Syntax | Category::Eof | Category::Io => "bad_json",
    };
    ServiceError::new(400, kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::request::Index;

    #[test]
    fn otel_addresses_decode_to_method_index_and_il_or_rva() {
        let f = FrameIn { module: Some(Index(Some(0))), address: Some(Num(((0xf000_0000u64 + 5) << 32) + 0x1a)), ..FrameIn::default() };
        assert!(matches!(ask_of(&f, At { group: 0, index: 0, nested: false }, 1), Ok((0, Ask::Il { token: 0x0600_0005, il: 0x1a }))));
        let f = FrameIn { module: Some(Index(Some(0))), address: Some(Num(0x1234)), return_address: Some(true), ..FrameIn::default() };
        assert!(matches!(ask_of(&f, At { group: 0, index: 0, nested: false }, 1), Ok((0, Ask::Rva { rva: 0x1234, kind: FrameKind::ReturnAddress }))));
    }
}
