//! Running processes: a rundown snapshot through the diagnostics port, behind the same objects a
//! `.nettrace` gets (`clrmap_profiler_info_open_pid`, `clrmap_symbolizer_open_pid`).

use std::time::Duration;

use clrmap::diag;
use clrmap::symbolizer::{Options, Symbolizer};

use crate::errors::Failure;
use crate::hresult::hresult_of_diag_kind;

/// A rundown snapshot of process `pid` (`clrmap::diag::snapshot`), indexed; its diagnostics error
/// kind's HRESULT when it fails. `timeout_ms` bounds the whole snapshot; 0 is the default (10 s).
pub(crate) fn open_pid(pid: u32, timeout_ms: u32, options: Options) -> Result<Symbolizer, Failure> {
    let timeout = if timeout_ms == 0 { diag::DEFAULT_TIMEOUT } else { Duration::from_millis(u64::from(timeout_ms)) };
    let opened = diag::snapshot(pid, timeout).map_err(|e| Failure::new(hresult_of_diag_kind(e.kind), format!("cannot take a snapshot of process {pid}: {e}")))?;
    Symbolizer::from_opened(opened, None, options).map_err(|e| Failure::not_opened(&e))
}
