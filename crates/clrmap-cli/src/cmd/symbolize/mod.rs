//! `clrmap symbolize`: addresses to method, IL offset and source line, in llvm-symbolizer's
//! layout or as JSON lines (docs/output.md#symbolized-frames).

mod pipeline;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

use clap::Args;

use clrmap::read::Location;
use clrmap::symbolizer::SourceKind;
use pipeline::Pipe;

use crate::args::{parse_address, FrameArgs};
use crate::output::{push_frame, write_frame, write_frame_with_context, write_inlined, CliError, JsonStrings, TextBytes, TokenError};

/// `clrmap symbolize SOURCE [ADDRESS...]`
#[derive(Debug, Args)]
pub struct SymbolizeArgs {
    /// A ReadyToRun image (addresses are RVAs), a .nettrace, a capture, or a core of a .NET 10 or 11
    /// process (absolute addresses). Not given with --pid.
    #[arg(required_unless_present = "pid")]
    pub source: Option<PathBuf>,
    /// Addresses: hex with 0x, or decimal (bare hex with --hex). Without any, one per line is
    /// read from stdin. An input that is not an address is named on stderr (with --json, an
    /// {"error":{...,"input":...}} line in its place on stdout) and answered `??`; the others are
    /// still answered, and the exit status is then 1.
    pub addresses: Vec<String>,
    #[command(flatten)]
    pub frame: FrameArgs,
    /// One JSON object per line ({"address":N,"module":...,"method":...,"il_offset":...,"file":...,"line":...}) instead of llvm-symbolizer's layout.
    #[arg(long)]
    pub json: bool,
    /// Inlined frames too, from the JIT's inline trees (traces and captures of .NET 7+ runs
    /// started with DOTNET_RichDebugInfo=1: `clrmap profile` does this, and `trace collect
    /// --inlines` records them): each inlinee whose code holds the address, innermost first, then
    /// the physical method at the call site, as llvm-symbolizer prints inlined code (JSON: an
    /// "inlined" array). Without it every answer is what the runtime's own StackTrace reports.
    #[arg(long)]
    pub inlines: bool,
    /// Source lines around each answer's line, N on each side (at most 20): from the source the
    /// PDB embeds, else from a --source-root file whose hash is the document's (never a file that
    /// differs). In text they follow the file:line:column line, each as `  LINE| text` (the
    /// answer's own line as `> LINE| text`), before the empty line that ends the answer; with
    /// --json they are the fields pre_context, context_line and post_context. Not with --inlines.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=20), conflicts_with = "inlines")]
    pub context: Option<u32>,
    /// Where documents are on this machine, for --context: PREFIX=DIR maps a document named
    /// PREFIX/rest to DIR/rest (for a deterministic build's `/_/src=./src`); repeatable, the
    /// first that has the file with the document's hash wins.
    #[arg(long = "source-root", value_name = "PREFIX=DIR", value_parser = parse_source_root)]
    pub source_root: Vec<clrmap::pdb::sources::SourceRoot>,
}

fn parse_source_root(text: &str) -> Result<clrmap::pdb::sources::SourceRoot, String> {
    clrmap::pdb::sources::SourceRoot::parse(text).ok_or_else(|| format!("{text:?} is not PREFIX=DIR"))
}

/// The longest stdin line read as an address (an address is at most 20 digits; a longer line is
/// one bad input, skipped to its newline without being held).
pub const MAX_LINE: usize = 4096;

/// How much of a bad line its error echoes.
const ECHO: usize = 64;

/// One input: its bytes (or, for an overlong line, its first bytes), where it came from, and
/// its full length.
struct Input<'a> {
    bytes: &'a [u8],
    /// Where it came from.
    place: Place,
    /// The byte offset of the input in stdin (`None` for an argument).
    offset: Option<u64>,
    /// The full length, when the line was longer than [`MAX_LINE`] and cut.
    overlong: Option<u64>,
}

/// Where an input came from (named only when it is bad: nothing is formatted for a good one).
#[derive(Clone, Copy)]
enum Place {
    /// The Nth ADDRESS argument.
    Argument(usize),
    /// The Nth line of stdin.
    Line(u64),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Argument(n) => write!(f, "argument {n}"),
            Place::Line(n) => write!(f, "line {n}"),
        }
    }
}

/// Run `symbolize`. Each input is answered in order; an input that is not an address is an
/// error that names it (stderr, or with `--json` a JSON error line in its place) and is answered
/// `??` in text, as llvm-symbolizer does, so a driver that waits for one answer per line is
/// never left waiting. Exit status 1 at the end when any input was bad.
pub fn run(args: SymbolizeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut out = Batched::new(out);
    let out = &mut out;
    // With --pid there is no SOURCE: what clap took for one is the first address.
    let mut addresses = args.addresses.clone();
    let source = match (args.frame.pid, &args.source) {
        (Some(_), Some(first)) => {
            addresses.insert(0, first.to_string_lossy().into_owned());
            None
        }
        (_, source) => source.clone(),
    };
    // A core of a .NET process answers its own addresses (docs/dumps.md).
    if let Some(path) = source.as_deref().filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file())) {
        let bytes = crate::output::read_file(path)?;
        if clrmap::dump::is_core(&bytes) {
            return run_core(&args, &bytes, &addresses, out);
        }
    }
    // Kept for the rest of the process: the reading half's thread borrows it, and is not waited
    // for when writing fails (it may be blocked reading a terminal).
    let sym: &'static clrmap::symbolizer::Symbolizer = Box::leak(Box::new(args.frame.open_or_pid(source.as_deref())?));
    if args.inlines && !sym.has_inline_trees() {
        // Said once; every answer is then the flat map's.
        eprintln!("note: the source carries no inline trees (a .NET 7+ process started with DOTNET_RichDebugInfo=1, traced with the runtime's private provider, or profiled by `clrmap profile`, has them; 3.1 never does): inlined frames cannot be told apart");
    }
    let json = args.json;
    let (to, from) = std::sync::mpsc::sync_channel(pipeline::BATCHES_IN_FLIGHT);
    // The reading half: each input looked up on its own thread, the answers handed over in order.
    let reader = std::thread::Builder::new().name("symbolize-read".into()).spawn(move || -> std::io::Result<(u64, u64)> {
        let mut pipe = Pipe::new(to);
        let read = answer_all(&args, sym, &addresses, &mut pipe);
        let sent = pipe.send();
        let counts = read?;
        sent.map(|()| counts)
    });
    let reader = reader.map_err(CliError::Io)?;
    // The writing half, here: an error writing (a closed pipe) is the command's at once.
    pipeline::write_all(from, out, json)?;
    let (seen, bad) = reader.join().map_err(|_| CliError::Io(std::io::Error::other("the addresses' reader stopped")))??;
    out.spill()?;
    crate::open::notes(sym, json);
    if bad > 0 {
        out.flush()?;
        let each = if json { "each has an error line in its place on stdout" } else { "each is named above and answered ??" };
        let message = format!("{bad} of {seen} inputs were not addresses ({each})");
        return Err(CliError::Kinded { kind: "bad_address", message });
    }
    Ok(())
}

/// The reading half: every input (the ADDRESS arguments, else stdin's lines) answered into
/// `pipe`, in order. Gives how many inputs there were and how many were not addresses.
fn answer_all<'s>(args: &SymbolizeArgs, sym: &'s clrmap::symbolizer::Symbolizer, addresses: &[String], pipe: &mut Pipe<'s>) -> std::io::Result<(u64, u64)> {
    let kind = args.frame.kind(sym);
    let (mut seen, mut bad) = (0u64, 0u64);
    let (image, mut warned) = (sym.kind() == SourceKind::ReadyToRun, false);
    let mut answer = |input: Input<'_>, out: &mut Pipe<'s>| -> std::io::Result<()> {
        seen = seen.saturating_add(1);
        let address = match (input.overlong, plain_hex(input.bytes)) {
            (Some(len), _) => Err(format!("a line of {len} bytes, longer than {MAX_LINE}: not an address")),
            (None, Some(a)) => Ok(a),
            (None, None) => std::str::from_utf8(input.bytes).map_err(|_| "not UTF-8 text".to_owned()).and_then(|t| parse_address(t, args.frame.hex)),
        };
        match address {
            Ok(a) => {
                // An image takes RVAs: say so once, when an address cannot be one.
                if image && a > u64::from(u32::MAX) && !warned {
                    warned = true;
                    eprintln!("warning: {} is beyond every RVA (answered ??): an image takes RVAs, offsets from its load address, not absolute addresses", TextBytes(input.bytes));
                }
                if args.inlines {
                    let (frame, inlined) = sym.symbolize_inlined(a, kind);
                    write_inlined(&frame, &inlined, args.json, out)
                } else if let Some(n) = args.context.filter(|n| *n > 0) {
                    let context = sym.context(a, kind, n, &args.source_root);
                    write_frame_with_context(&sym.symbolize(a, kind), context.as_ref(), args.json, out)
                } else {
                    out.frame(sym.symbolize(a, kind))
                }
            }
            Err(why) => {
                bad = bad.saturating_add(1);
                match bad_input(&input, &why, args.json, out)? {
                    Some(line) => out.stderr(line),
                    None => Ok(()),
                }
            }
        }
    };
    if !addresses.is_empty() {
        for (i, a) in addresses.iter().enumerate() {
            let input = Input { bytes: a.trim().as_bytes(), place: Place::Argument(i.saturating_add(1)), offset: None, overlong: None };
            answer(input, pipe)?;
        }
    } else {
        let stdin = std::io::stdin();
        read_lines(&mut BufReader::with_capacity(1 << 16, stdin.lock()), pipe, &mut answer)?;
    }
    Ok((seen, bad))
}

/// `0x` (or `0X`) and 1 to 16 hex digits: the address [`parse_address`] reads from them (with or
/// without `--hex`), read without its checks; `None` for anything else, which goes to it.
fn plain_hex(bytes: &[u8]) -> Option<u64> {
    let digits = bytes.strip_prefix(b"0x").or_else(|| bytes.strip_prefix(b"0X"))?;
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |a, &b| {
        let d = match b {
            b'0'..=b'9' => b.wrapping_sub(b'0'),
            b'a'..=b'f' => b.wrapping_sub(b'a').wrapping_add(10),
            b'A'..=b'F' => b.wrapping_sub(b'A').wrapping_add(10),
            _ => return None,
        };
        Some(a << 4 | u64::from(d))
    })
}

/// How many bytes of answers [`Batched`] holds before it passes them on.
const BATCH: usize = 1 << 16;

/// The answers' writer: every answer is written into one buffer, passed on when it holds
/// [`BATCH`] bytes, on `flush` and when dropped, so a stream of addresses costs one call through
/// the output a batch (not one an answer) and no copy of each answer on its way there. What is
/// written through `Write` (errors, other layouts) joins the same buffer, in order.
struct Batched<'o> {
    buf: Vec<u8>,
    out: &'o mut dyn Write,
    strings: JsonStrings,
}

impl<'o> Batched<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        Batched { buf: Vec::with_capacity(BATCH.saturating_add(MAX_LINE)), out, strings: JsonStrings::default() }
    }

    /// One answer in `write_frame`'s layout.
    fn frame(&mut self, f: &clrmap::symbolizer::Frame<'_>, json: bool) -> std::io::Result<()> {
        push_frame(&mut self.buf, f, json, &mut self.strings);
        if self.buf.len() >= BATCH {
            self.spill()?;
        }
        Ok(())
    }

    /// Pass on what the buffer holds (without flushing the output).
    fn spill(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl Write for Batched<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= BATCH {
            self.spill()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.spill()?;
        self.out.flush()
    }
}

impl Drop for Batched<'_> {
    fn drop(&mut self) {
        // On an early return: what was answered still reaches the output, as before.
        let _ = self.spill();
    }
}

/// Report one bad input: a `??` answer on stdout and the line to print on stderr once stdout is
/// flushed (given back), or, with `json`, a JSON error line on stdout in its place.
fn bad_input(input: &Input<'_>, why: &str, json: bool, out: &mut dyn Write) -> std::io::Result<Option<String>> {
    let location = input.offset.map_or(Location::Nowhere, Location::Offset);
    let echo = input.bytes.get(..ECHO).unwrap_or(input.bytes);
    let cut = if echo.len() < input.bytes.len() || input.overlong.is_some() { "..." } else { "" };
    if json {
        let error = TokenError { kind: "bad_address", input: format!("{}{cut}", String::from_utf8_lossy(echo)), location, message: format!("{}: {why}", input.place) };
        writeln!(out, "{}", error.json())?;
        Ok(None)
    } else {
        out.write_all(b"??\n??:0:0\n\n")?;
        Ok(Some(format!("error: bad_address{location}: {} is {}{cut}: {why}", input.place, TextBytes(echo))))
    }
}

/// Read stdin's lines, each bounded by [`MAX_LINE`] (memory does not follow a line's length), and
/// answer each one that is not blank.
fn read_lines<R: Read, W: Write + ?Sized>(input: &mut BufReader<R>, out: &mut W, answer: &mut dyn FnMut(Input<'_>, &mut W) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::with_capacity(MAX_LINE);
    // The line's start offset in stdin, its full length, and its number.
    let (mut start, mut len, mut number) = (0u64, 0u64, 0u64);
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if len == 0 {
            // At a line's start: each whole line the buffer holds is answered where it is (the
            // same bytes, offsets and numbers as below, without a copy). What is left (a line cut
            // by the buffer's end, an overlong line, the last line without a newline) is read
            // below.
            let mut used = 0usize;
            let whole_line = |used: usize| {
                let ahead = buf.get(used..)?;
                let ahead = ahead.get(..ahead.len().min(MAX_LINE.saturating_add(1)))?;
                ahead.get(..ahead.iter().position(|&c| c == b'\n')?)
            };
            while let Some(text) = whole_line(used) {
                number = number.saturating_add(1);
                let lead = text.iter().take_while(|b| b.is_ascii_whitespace()).count();
                let trimmed = text.get(lead..).unwrap_or(&[]).trim_ascii_end();
                if !trimmed.is_empty() {
                    let offset = start.saturating_add(lead as u64);
                    answer(Input { bytes: trimmed, place: Place::Line(number), offset: Some(offset), overlong: None }, out)?;
                }
                start = start.saturating_add(text.len() as u64).saturating_add(1);
                used = used.saturating_add(text.len()).saturating_add(1);
            }
            if used > 0 {
                input.consume(used);
                if input.buffer().is_empty() {
                    out.flush()?;
                }
                continue;
            }
        }
        let eof = buf.is_empty();
        let (chunk, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (buf.get(..i).unwrap_or(&[]), true),
            None => (buf, eof),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(chunk.get(..room).unwrap_or(chunk));
        len = len.saturating_add(chunk.len() as u64);
        let used = chunk.len().saturating_add(usize::from(ended && !eof));
        input.consume(used);
        if !ended {
            continue;
        }
        if eof && len == 0 {
            return Ok(());
        }
        number = number.saturating_add(1);
        let lead = line.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let trimmed = line.get(lead..).unwrap_or(&[]).trim_ascii_end();
        if !trimmed.is_empty() || len > MAX_LINE as u64 {
            let overlong = (len > MAX_LINE as u64).then_some(len);
            let offset = start.saturating_add(lead as u64);
            answer(Input { bytes: trimmed, place: Place::Line(number), offset: Some(offset), overlong }, out)?;
        }
        start = start.saturating_add(len).saturating_add(1);
        line.clear();
        len = 0;
        // A tool that drives us as it drives llvm-symbolizer writes one address and waits for
        // the answer: flush whenever no more input is already waiting, and only then, so a
        // stream of a million addresses costs a few writes, not a million.
        if eof {
            return Ok(());
        }
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}

/// The most addresses one run answers from a core (they are answered together, in one pass over
/// the core).
const MAX_CORE_ADDRESSES: usize = 1 << 20;

/// One input kept for a core's single pass: its bytes, where it came from, its offset in stdin and
/// its full length when cut.
type OwnedInput = (Vec<u8>, Place, Option<u64>, Option<u64>);

/// `symbolize CORE [ADDRESS...]`: the addresses (arguments, else stdin's lines) answered by the
/// library's `dump::symbolize`, in the same layouts as any other source's answers.
fn run_core(args: &SymbolizeArgs, core: &[u8], addresses: &[String], out: &mut dyn Write) -> Result<(), CliError> {
    // Every input first (owned), then one pass over the core, then the answers in order.
    let mut inputs: Vec<OwnedInput> = Vec::new();
    if !addresses.is_empty() {
        for (i, a) in addresses.iter().enumerate() {
            inputs.push((a.trim().as_bytes().to_vec(), Place::Argument(i.saturating_add(1)), None, None));
        }
    } else {
        let stdin = std::io::stdin();
        let mut sink = std::io::sink();
        read_lines(&mut BufReader::with_capacity(1 << 16, stdin.lock()), &mut sink, &mut |input: Input<'_>, _: &mut std::io::Sink| {
            if inputs.len() >= MAX_CORE_ADDRESSES {
                return Err(std::io::Error::other(format!("more than {MAX_CORE_ADDRESSES} addresses for one core: give them in several runs")));
            }
            inputs.push((input.bytes.to_vec(), input.place, input.offset, input.overlong));
            Ok(())
        })
        .map_err(CliError::Io)?;
    }
    let parsed: Vec<Result<u64, String>> = inputs
        .iter()
        .map(|(bytes, _, _, overlong)| match (overlong, std::str::from_utf8(bytes)) {
            (Some(len), _) => Err(format!("a line of {len} bytes, longer than {MAX_LINE}: not an address")),
            (None, Ok(t)) => parse_address(t, args.frame.hex),
            (None, Err(_)) => Err("not UTF-8 text".to_owned()),
        })
        .collect();
    let good: Vec<u64> = parsed.iter().filter_map(|p| p.as_ref().ok().copied()).collect();
    let report = clrmap::dump::symbolize(core, &good, args.frame.return_address, &args.frame.symbols.paths(args.frame.pdb.clone())).map_err(|error| CliError::Input { error, json: args.json })?;
    let mut answers = report.threads.iter().flat_map(|t| t.frames.iter());
    let mut bad = 0u64;
    for ((bytes, place, offset, overlong), p) in inputs.iter().zip(&parsed) {
        match p {
            Ok(_) => {
                let Some(f) = answers.next() else { break };
                let mut frame = clrmap::symbolizer::Frame { address: f.ip, ..Default::default() };
                frame.at.module = f.module.as_deref().map(|m| m.rsplit('/').next().unwrap_or(m));
                frame.at.token = f.token;
                frame.at.method = f.method.as_deref();
                frame.at.il_offset = f.il_offset;
                frame.at.file = f.file.as_deref();
                frame.at.line = f.line;
                frame.at.column = f.column;
                write_frame(&frame, args.json, out).map_err(CliError::Io)?;
            }
            Err(why) => {
                bad = bad.saturating_add(1);
                if let Some(line) = bad_input(&Input { bytes, place: *place, offset: *offset, overlong: *overlong }, why, args.json, out).map_err(CliError::Io)? {
                    // stdout first, so that what a reader of both sees is in order.
                    out.flush().map_err(CliError::Io)?;
                    eprintln!("{line}");
                }
            }
        }
    }
    for n in &report.notes {
        eprintln!("note: {}", crate::output::Text(n));
    }
    if bad > 0 {
        out.flush().map_err(CliError::Io)?;
        let each = if args.json { "each has an error line in its place on stdout" } else { "each is named above and answered ??" };
        return Err(CliError::Kinded { kind: "bad_address", message: format!("{bad} of {} inputs were not addresses ({each})", inputs.len()) });
    }
    Ok(())
}
