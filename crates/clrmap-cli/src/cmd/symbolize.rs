//! `clrmap symbolize`: addresses to method, IL offset and source line, in llvm-symbolizer's
//! layout or as JSON lines (contract §5).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use clrmap::symbolizer::Frame;

use crate::args::{parse_u64, FrameArgs};
use crate::output::{write_frame, CliError};




/// `clrmap symbolize SOURCE [ADDRESS...]`
#[derive(Debug, Args)]
pub struct SymbolizeArgs {
    /// A ReadyToRun image (addresses are RVAs), a .nettrace or a capture (absolute addresses).
    /// Not given with --pid.
    #[arg(required_unless_present = "pid")]
    pub source: Option<PathBuf>,
    /// Addresses, hex with 0x or decimal. Without any, one per line is read from stdin.
    pub addresses: Vec<String>,
    #[command(flatten)]
    pub frame: FrameArgs,
    /// One JSON object per line ({"address":N,"module":...,"method":...,"il_offset":...,"file":...,"line":...}) instead of llvm-symbolizer's layout.
    #[arg(long)]
    pub json: bool,
}


/// Run `symbolize`. An input that is not an address is answered as an unknown address, as
/// llvm-symbolizer does since LLVM 18.
pub fn run(args: SymbolizeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    // With --pid there is no SOURCE: what clap took for one is the first address.
    let mut addresses = args.addresses.clone();
    let source = match (args.frame.pid, &args.source) {
        (Some(_), Some(first)) => {
            addresses.insert(0, first.to_string_lossy().into_owned());
            None
        }
        (_, source) => source.clone(),
    };
    let sym = args.frame.open_or_pid(source.as_deref())?;
    let kind = args.frame.kind();
    let answer = |text: &str, out: &mut dyn Write| -> std::io::Result<()> {
        let f = match parse_u64(text.trim()) {
            Ok(a) => sym.symbolize(a, kind),
            Err(_) => Frame::default(),
        };
        write_frame(&f, args.json, out)
    };
    if !addresses.is_empty() {
        for a in &addresses {
            answer(a, out)?;
        }
        return Ok(());
    }
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::with_capacity(1 << 16, stdin.lock());
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if !line.trim().is_empty() {
            answer(&line, out)?;
        }
        // A tool that drives us as it drives llvm-symbolizer writes one address and waits for
        // the answer: flush whenever no more input is already waiting, and only then, so a
        // stream of a million addresses costs a few writes, not a million.
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}
