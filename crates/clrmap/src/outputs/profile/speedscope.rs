//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): shared
//! frames with `name`, `file` and `line`, and one `sampled` profile per thread, its samples the
//! distinct stacks (root first) and its weights their time in nanoseconds (samples × the
//! sampling interval). Profiles are ordered by weight, the busiest thread first (speedscope opens
//! the first).

use std::collections::HashMap;
use std::io::Write;

use super::Profile;

/// A JSON string literal.
pub(super) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len().saturating_add(2));
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A thread's total samples, its id, and its stacks (node, samples).
type ThreadStacks = (u64, u64, Vec<(u32, u64)>);

impl Profile {
    /// Write a speedscope file named `name`. Frame names are `Method (File.cs:LINE)` so lines
    /// show in the flame graph; `file` and `line` carry the document and line apart.
    pub fn write_speedscope(&self, name: &str, out: &mut dyn Write) -> std::io::Result<()> {
        write!(
            out,
            "{{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":{},\"name\":{},\"activeProfileIndex\":0,\"shared\":{{\"frames\":[",
            json_str(&format!("clrmap {}", env!("CARGO_PKG_VERSION"))),
            json_str(name)
        )?;
        for (i, f) in self.frames.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{{\"name\":{}", json_str(&f.text()))?;
            if let Some(file) = &f.file {
                write!(out, ",\"file\":{}", json_str(file))?;
            }
            if let Some(line) = f.line {
                write!(out, ",\"line\":{line}")?;
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"]},\"profiles\":[")?;
        // Stacks by thread, threads by weight.
        let mut by_thread: HashMap<u64, Vec<(u32, u64)>> = HashMap::new();
        for (thread, node, samples) in self.stacks() {
            by_thread.entry(thread).or_default().push((node, samples));
        }
        let mut threads: Vec<ThreadStacks> = by_thread.into_iter().map(|(t, v)| (v.iter().map(|x| x.1).fold(0u64, u64::saturating_add), t, v)).collect();
        threads.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let (mut locs, mut frames) = (Vec::new(), Vec::new());
        for (i, (total, thread, stacks)) in threads.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let pname = if self.per_thread { format!("Thread {thread}") } else { "All threads".to_owned() };
            write!(out, "{{\"type\":\"sampled\",\"name\":{},\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":{},\"samples\":[", json_str(&pname), total.saturating_mul(self.interval_ns))?;
            for (j, &(node, _)) in stacks.iter().enumerate() {
                self.frames_root_first(node, &mut locs, &mut frames);
                out.write_all(if j > 0 { b",[" } else { b"[" })?;
                for (k, f) in frames.iter().enumerate() {
                    if k > 0 {
                        out.write_all(b",")?;
                    }
                    write!(out, "{f}")?;
                }
                out.write_all(b"]")?;
            }
            out.write_all(b"],\"weights\":[")?;
            for (j, &(_, samples)) in stacks.iter().enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}", samples.saturating_mul(self.interval_ns))?;
            }
            out.write_all(b"]}")?;
        }
        out.write_all(b"]}\n")
    }
}
