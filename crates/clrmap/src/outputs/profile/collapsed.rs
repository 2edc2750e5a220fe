//! Collapsed stacks: one `frame;frame;...;leaf COUNT` line per distinct stack, root first, as
//! flamegraph.pl's and inferno's collapse steps write them. Threads are merged (the profile is
//! read with `per_thread` false); a per-thread profile's lines start with `Thread ID`.

use std::io::Write;

use super::Profile;

impl Profile {
    /// Write collapsed stacks. A frame's text is `Method (File.cs:LINE)` ([`super::FrameInfo::text`]),
    /// with `;` and line breaks (which would split it) replaced by `_` and a space.
    pub fn write_collapsed(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let texts: Vec<String> = self.frames.iter().map(|f| f.text().replace(';', "_").replace(['\n', '\r'], " ")).collect();
        let (mut locs, mut frames) = (Vec::new(), Vec::new());
        let mut line = String::new();
        for (thread, node, samples) in self.stacks() {
            self.frames_root_first(node, &mut locs, &mut frames);
            line.clear();
            if self.per_thread {
                line.push_str(&format!("Thread {thread}"));
            }
            for &f in &frames {
                if !line.is_empty() {
                    line.push(';');
                }
                line.push_str(texts.get(f as usize).map(String::as_str).unwrap_or("[unknown]"));
            }
            if line.is_empty() {
                // A sample whose every frame was folded: its thread's root.
                line.push_str("[root]");
            }
            writeln!(out, "{line} {samples}")?;
        }
        Ok(())
    }
}
