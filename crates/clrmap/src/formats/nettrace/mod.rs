//! EventPipe traces (`.nettrace`): where jitted code's IL-to-native maps live (docs/format-notes.md#eventpipe-traces).
//!
//! [`read_events`] streams the container (`container` holds its constants and rules; [`Framer`]
//! follows it as a diagnostics session's bytes arrive); [`MethodTable`] pairs MethodLoadVerbose/DCEnd events
//! with their IL maps; [`read_code_bodies`] gives every jitted body with the map
//! `GetILToNativeMapping3(start)` returns, FunctionID = the trace's MethodID.

pub mod bulk_type;
mod clr;
mod container;
mod framer;
mod stacks;
mod stream;

pub use clr::{
    event_name, il_map, method_load, module_load, read_code_bodies, read_code_bodies_and_inlines, read_code_bodies_and_inlines_clr, read_code_bodies_partial, read_code_bodies_partial_with,
    rebuild_map, runtime_information, runtime_major, IlMapEvent, MethodLoad, MethodTable, ModuleLoad, RuntimeInformation, TraceInlines, RUNDOWN, RUNTIME,
};
pub use container::{check_type_version, MAX_BLOCK, NEWEST_BLOCK_VERSION, NEWEST_TRACE_VERSION};
pub use framer::Framer;
pub use stacks::{read_samples, stack_block, Sample, TraceWriter, MAX_STACKS, MAX_STACK_WORDS, SAMPLE_PROFILER};
pub(crate) use stream::IntMap;
pub use stream::{read_events, read_events_partial, utf16z, Encoding, Event, EventMeta, Stats};
