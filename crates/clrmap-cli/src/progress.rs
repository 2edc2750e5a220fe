//! Progress on long work (reading a large trace, collecting one, writing a capture, fetching
//! symbols, extracting sources): a bar or a counter on stderr when stderr is a terminal, and
//! nothing at all when it is a pipe or a file (CI logs, scripts) or with `--quiet`.

use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no progress, whatever stderr is.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress is shown: stderr is a terminal and `--quiet` was not given.
pub fn shown() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// One piece of long work's progress; cleared from the terminal when dropped.
#[derive(Debug)]
pub struct Progress(Option<ProgressBar>);

impl Progress {
    fn new(bar: impl FnOnce() -> ProgressBar, template: &str, message: &str) -> Progress {
        if !shown() {
            return Progress(None);
        }
        let bar = bar().with_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())).with_message(message.to_owned());
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        // Drawn at once, and kept moving while the work waits (a process, a server).
        bar.tick();
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress(Some(bar))
    }

    /// Bytes out of a known total.
    pub fn bytes(total: u64, message: &str) -> Progress {
        Progress::new(|| ProgressBar::new(total), "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta} left)", message)
    }

    /// Bytes with no total known (a stream).
    pub fn stream(message: &str) -> Progress {
        Progress::new(ProgressBar::no_length, "{spinner} {msg}: {binary_bytes} ({binary_bytes_per_sec}, {elapsed})", message)
    }

    /// Items out of a known total.
    pub fn items(total: u64, message: &str) -> Progress {
        Progress::new(|| ProgressBar::new(total), "{msg} [{bar:30}] {pos}/{len}", message)
    }

    /// Work with nothing to count: a spinner and the time taken.
    pub fn waiting(message: &str) -> Progress {
        Progress::new(ProgressBar::no_length, "{spinner} {msg} ({elapsed})", message)
    }

    /// Move to `n`.
    pub fn set(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.set_position(n);
        }
    }

    /// Move on by `n`.
    pub fn add(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

/// A reader that moves a [`Progress`] by the bytes read through it.
#[derive(Debug)]
pub struct Reading<R> {
    inner: R,
    progress: Progress,
}

impl<R> Reading<R> {
    /// `inner`, counted on `progress`.
    pub fn new(inner: R, progress: Progress) -> Self {
        Reading { inner, progress }
    }
}

impl<R: Read> Read for Reading<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(u64::try_from(n).unwrap_or(0));
        Ok(n)
    }
}
