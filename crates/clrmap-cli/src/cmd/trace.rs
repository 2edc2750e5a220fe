//! `clrmap trace`: EventPipe traces (.nettrace).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::Subcommand;

use clrmap::nettrace::event_name;

use crate::output::CliError;

/// `clrmap trace ...`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Count a trace's events by provider, event id and version, and its blocks. Shows progress on
    /// stderr for large files when stderr is a terminal.
    ///
    /// Example: `clrmap trace stats examples/frames.nettrace`
    #[command(verbatim_doc_comment)]
    Stats {
        /// The .nettrace file.
        trace: PathBuf,
        /// One JSON object: {"bytes":N,"events":[{"provider","id","version","name","count"}],"blocks":{...}}.
        #[arg(long)]
        json: bool,
    },
}

/// Counts bytes read and draws a progress line every 16 MiB.
struct Progress<R> {
    inner: R,
    read: u64,
    total: u64,
    next: u64,
    show: bool,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read = self.read.saturating_add(n as u64);
        if self.show && self.read >= self.next {
            self.next = self.next.saturating_add(16 << 20);
            let pct = self.read.saturating_mul(100).checked_div(self.total).unwrap_or(100);
            eprint!("\r{} / {} MiB ({pct}%)", self.read >> 20, self.total >> 20);
        }
        Ok(n)
    }
}

/// Run a `trace` command.
pub fn run(cmd: TraceCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        TraceCommand::Stats { trace, json } => {
            let file = clrmap::fs::open_regular(&trace).map_err(|e| CliError::Message(format!("cannot read {}: {e}", trace.display())))?;
            let total = file.metadata().map(|m| m.len()).unwrap_or(0);
            let show = total > 64 << 20 && std::io::stderr().is_terminal();
            let reader = Progress { inner: std::io::BufReader::with_capacity(1 << 20, file), read: 0, total, next: 16 << 20, show };
            let stats = clrmap::nettrace::read_events(reader, |_| {}).map_err(CliError::input);
            if show {
                eprintln!();
            }
            let stats = stats?;
            let mut events: Vec<_> = stats.events.iter().collect();
            events.sort();
            if json {
                let events: Vec<serde_json::Value> =
                    events.iter().map(|((provider, id, version), n)| serde_json::json!({"provider": provider, "id": id, "version": version, "name": event_name(provider, *id), "count": n})).collect();
                let blocks: std::collections::BTreeMap<_, _> = stats.blocks.iter().collect();
                let v = serde_json::json!({"bytes": stats.bytes, "events": events, "blocks": blocks, "unknown_events": stats.unknown_events});
                writeln!(out, "{v}")?;
                return Ok(());
            }
            writeln!(out, "{} bytes", stats.bytes)?;
            for ((provider, id, version), n) in events {
                let name = event_name(provider, *id).map_or(String::new(), |n| format!(" {n}"));
                writeln!(out, "{n:>10}  {} {id} v{version}{name}", crate::output::Text(provider))?;
            }
            let mut blocks: Vec<_> = stats.blocks.iter().collect();
            blocks.sort();
            for (name, n) in blocks {
                writeln!(out, "{n:>10}  block {}", crate::output::Text(name))?;
            }
            if stats.unknown_events > 0 {
                writeln!(out, "{:>10}  events with unknown metadata (skipped)", stats.unknown_events)?;
            }
            Ok(())
        }
    }
}
