//! `clrmap dump CORE`: every thread of a Linux core of a .NET process, with its managed frames
//! (the library's `dump` module; docs/dumps.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::output::{CliError, Text};

/// `clrmap dump CORE`
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The core file: createdump's full dump (`createdump -u`, or DOTNET_DbgEnableMiniDump=1 with
    /// DOTNET_DbgMiniDumpType=4 at a crash) or the kernel's core.
    pub core: PathBuf,
    /// One JSON document: the runtime, every thread with its frames, and the notes.
    #[arg(long)]
    pub json: bool,
    /// Also list the methods the JIT inlined into each jitted frame, innermost first, above it
    /// (for a process run with DOTNET_RichDebugInfo=1: the runtime then keeps each body's inline
    /// tree, and the core holds it).
    #[arg(long)]
    pub inlines: bool,
    /// The most frames listed a thread.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_frames: usize,
    /// Where ReadyToRun frames' PDBs are looked for (their IL offsets come from the images the
    /// process loaded; the line needs the PDB).
    #[command(flatten)]
    pub symbols: crate::args::SymbolArgs,
}

/// Run it: a file that is not an ELF core is an error (exit 1); what the core or the runtime
/// lacks is a note in the output.
pub fn run(a: DumpArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let bytes = crate::output::read_file(&a.core)?;
    let mut report = clrmap::dump::analyze(&bytes, &clrmap::dump::Options { max_frames: a.max_frames, inlines: a.inlines }).map_err(|error| CliError::Input { error, json: a.json })?;
    clrmap::dump::add_lines(&mut report, &a.symbols.paths(None));
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report).map_err(|e| CliError::Io(std::io::Error::other(e)))?;
        writeln!(out).map_err(CliError::Io)?;
        return Ok(());
    }
    write_text(&report, out).map_err(CliError::Io)
}

fn write_text(r: &clrmap::dump::DumpReport, out: &mut dyn Write) -> std::io::Result<()> {
    match &r.runtime {
        Some(rt) => writeln!(out, "runtime {} (descriptor 0x{:x}, from the {})", Text(&rt.path), rt.descriptor, rt.found_in)?,
        None => writeln!(out, "runtime: none with a contract descriptor")?,
    }
    for t in &r.threads {
        write!(out, "\nthread {} (0x{:x})", t.os_id, t.os_id)?;
        if let Some(id) = t.managed_id {
            write!(out, " managed id {id}")?;
        }
        writeln!(out)?;
        if let Some(e) = &t.exception {
            writeln!(out, "  exception {} at 0x{:x}: {}", Text(e.type_name.as_deref().unwrap_or("?")), e.address, Text(e.message.as_deref().unwrap_or("")))?;
        }
        for f in &t.frames {
            for i in &f.inlined {
                write!(out, "  {:016x} {:016x} [inlined] {}", f.sp, f.ip, Text(i.method.as_deref().unwrap_or("??")))?;
                write_place(out, i.module.as_deref(), i.il_offset, i.file.as_deref(), i.line, i.column)?;
            }
            if f.kind == "managed" {
                write!(out, "  {:016x} {:016x} {}", f.sp, f.ip, Text(f.method.as_deref().unwrap_or("??")))?;
                if let Some(off) = f.native_offset {
                    write!(out, " +0x{off:x}")?;
                }
                write_place(out, f.module.as_deref(), f.il_offset, f.file.as_deref(), f.line, f.column)?;
            } else if f.kind == "native" || f.kind == "signal" {
                // `libc.so.6!read+0x12`, or `libfoo.so+0x1234` outside every symbol; the signal
                // return trampoline marked as such.
                let module = f.module.as_deref().map_or("??", |m| m.rsplit('/').next().unwrap_or(m));
                let at = f.symbol.as_deref().map_or_else(|| Text(module).to_string(), |m| format!("{}!{}", Text(module), Text(m)));
                let signal = if f.kind == "signal" { " <signal frame>" } else { "" };
                writeln!(out, "  {:016x} {:016x} {at}+0x{:x}{signal}", f.sp, f.ip, f.native_offset.unwrap_or(0))?;
            } else {
                writeln!(out, "  {:016x} {:016x} [{}]", f.sp, f.ip, Text(&f.kind))?;
            }
        }
        for n in &t.notes {
            writeln!(out, "  note: {}", Text(n))?;
        }
    }
    for n in &r.notes {
        writeln!(out, "note: {}", Text(n))?;
    }
    Ok(())
}

/// The rest of a managed or inlined frame's line: ` [Module.dll] IL_001f at FILE:LINE:COLUMN`, each
/// part where known, then the line's end.
fn write_place(out: &mut dyn Write, module: Option<&str>, il: Option<u32>, file: Option<&str>, line: Option<u32>, column: Option<u32>) -> std::io::Result<()> {
    if let Some(m) = module {
        write!(out, " [{}]", Text(m.rsplit('/').next().unwrap_or(m)))?;
    }
    if let Some(il) = il {
        write!(out, " IL_{il:04x}")?;
    }
    if let (Some(file), Some(line)) = (file, line) {
        write!(out, " at {}:{line}:{}", Text(file), column.unwrap_or(0))?;
    }
    writeln!(out)
}
