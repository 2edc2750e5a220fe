//! The printers, tested in-process against golden files (tests/golden/), next to the
//! spawned-binary tests of tests/cli/. Each test parses its arguments with clap and calls `run`,
//! as `main` does, writing into a `Vec<u8>`; its text output and its `--json` output are compared
//! byte for byte with the committed files. `CLRMAP_BLESS_GOLDEN=1` rewrites them instead.
//!
//! The inputs are the repository's own files, which need no .NET: `examples/frames.nettrace`
//! (with `examples/frames.stdout`, what the traced program printed in that same run),
//! `examples/two-lists.gdmap` (built from `examples/two-lists.manifest`), and the fixtures under
//! `tests/fixtures/frames` and `tests/fixtures/perf`. Tests of images under ./.dotnet are ignored
//! ("needs .NET") and fail when the runtime is missing.
//!
//! A golden file was not taken on trust from our own run: tests/golden/README.md says what each
//! one was checked against (docs/output.md's notation, the C# sources' line numbers, the runtime's
//! own frames, the SRM oracle, the bytes of the inputs).

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::{run, Cli};

/// Where the golden files are.
fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// A file of the repository, as the commands are given it: relative to this crate's directory,
/// where cargo runs unit tests, so that no output holds a path that differs between checkouts.
fn repo(rel: &str) -> String {
    format!("../../{rel}")
}

#[path = "../../../tests/support/runtimes.rs"]
mod runtimes_list;

/// The ReadyToRun CoreLib of an installed runtime channel (scripts/install-dotnet.sh): an absolute
/// path. Missing is a failure, not a skip: these tests are ignored outside CI and mandatory in it.
fn corelib(channel: &str) -> String {
    runtimes_list::runtime(channel).corelib().to_string_lossy().into_owned()
}

/// Run `clrmap ARGS` in-process and give its stdout. A failing command fails the test.
fn output(args: &[&str]) -> String {
    let cli = Cli::try_parse_from(std::iter::once("clrmap").chain(args.iter().copied())).unwrap_or_else(|e| panic!("clrmap {args:?}: {e}"));
    let mut out = Vec::new();
    run(cli, &mut out).unwrap_or_else(|e| panic!("clrmap {args:?}: {e:?}"));
    String::from_utf8(out).unwrap()
}

/// Compare `clrmap ARGS` with the golden file `name`, or write it under CLRMAP_BLESS_GOLDEN=1.
/// `replace` turns machine-specific strings of the output (a .NET home's path) into names.
fn golden(name: &str, args: &[&str], replace: &[(&str, &str)]) {
    let mut got = output(args);
    for (from, to) in replace {
        got = got.replace(from, to);
    }
    let path = golden_dir().join(name);
    if std::env::var_os("CLRMAP_BLESS_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (CLRMAP_BLESS_GOLDEN=1 writes it)", path.display()));
    assert!(got == want, "clrmap {args:?} differs from {}\n--- golden\n{want}--- now\n{got}", path.display());
}

/// The text form as `NAME.txt` and the `--json` form as `NAME.json`.
fn golden_pair(name: &str, args: &[&str], replace: &[(&str, &str)]) {
    golden(&format!("{name}.txt"), args, replace);
    let mut json = args.to_vec();
    json.push("--json");
    golden(&format!("{name}.json"), &json, replace);
}

#[test]
fn sig_decode() {
    golden_pair("sig-decode-genericinst", &["sig", "decode", "15", "12", "15", "01", "08"], &[]);
    golden_pair("sig-decode-fnptr", &["sig", "decode", "1B 00 02 08 0E 10 08"], &[]);
    golden_pair("sig-decode-array", &["sig", "decode", "14 08 02 01 0A 01 00"], &[]);
}

#[test]
fn dict_show_lookup_validate() {
    let map = repo("examples/two-lists.gdmap");
    golden_pair("dict-show", &["dict", "show", &map], &[]);
    golden_pair("dict-lookup", &["dict", "lookup", &map, "0x2010"], &[]);
    golden_pair("dict-validate-lint", &["dict", "validate", &map, "--lint"], &[]);
}

#[test]
fn meta_specs() {
    golden_pair("meta-specs-frames", &["meta", "specs", &repo("tests/fixtures/frames/debug-portable/Frames.dll")], &[]);
}

#[test]
fn pdb_lines() {
    golden_pair("pdb-lines-hot-ownloop", &["pdb", "lines", &repo("tests/fixtures/perf/Hot.dll"), "--method", "Hot::OwnLoop"], &[]);
    golden_pair("pdb-lines-frames-recurse", &["pdb", "lines", &repo("tests/fixtures/frames/debug-portable/Frames.dll"), "--method", "Frames.Nested::Recurse"], &[]);
}

#[test]
fn trace_stats() {
    golden_pair("trace-stats", &["trace", "stats", &repo("examples/frames.nettrace")], &[]);
}

#[test]
fn il_dump_of_a_trace() {
    golden_pair("il-dump-trace-recurse", &["il", "dump", &repo("examples/frames.nettrace"), "--method", "Frames.Nested::Recurse"], &[]);
}

/// Capture 7 of examples/frames.stdout: Frames.Nested::Recurse's own frame (native offset 62 in
/// the body that starts at 0x7F8CE5225990).
#[test]
fn il_at_in_a_trace() {
    let trace = repo("examples/frames.nettrace");
    let symbols = repo("tests/fixtures/frames/debug-embedded");
    golden_pair("il-at-trace-recurse", &["il", "at", &trace, "0x7F8CE52259CE", "--return-address", "--symbol-path", &symbols], &[]);
}

/// Every distinct frame of capture 7 (examples/frames.stdout: the start of each body in the trace
/// plus the runtime's native offset), and an address in no body.
#[test]
fn symbolize_a_trace() {
    let trace = repo("examples/frames.nettrace");
    let symbols = repo("tests/fixtures/frames/debug-embedded");
    let addresses = ["0x7f8ce52232f1", "0x7f8ce52259ce", "0x7f8ce52259e2", "0x7f8ce52257dc", "0x7f8ce5223239", "0x7f8ce5223192", "0x10"];
    let mut args = vec!["symbolize", &trace, "--symbol-path", &symbols, "--return-address"];
    args.extend(addresses);
    golden_pair("symbolize-trace-capture7", &args, &[]);
}

/// `AppContext::Setup`'s RVA in each 3.1 CoreLib the install script can lay out (3.1.3 from NuGet,
/// 3.1.23 from PyPI), each checked against that build's live runtime (tests/golden/README.md); the
/// method's code, map and variables are the same in both.
const SETUP_RVAS: [(&str, &str); 4] = [("0x392C90", "$SETUP_RVA"), ("3746960", "$SETUP_RVA"), ("0x393480", "$SETUP_RVA"), ("3748992", "$SETUP_RVA")];

fn with_setup_rvas(corelib: &str) -> Vec<(&str, &str)> {
    let mut r = vec![(corelib, "$CORELIB31")];
    r.extend(SETUP_RVAS);
    r
}

#[test]
#[ignore = "needs .NET"]
fn il_dump_of_an_image() {
    let corelib = corelib("3.1");
    golden_pair("il-dump-corelib31-appcontext-setup", &["il", "dump", &corelib, "--method", "System.AppContext::Setup"], &with_setup_rvas(&corelib));
}

#[test]
#[ignore = "needs .NET"]
fn il_vars_of_an_image() {
    let corelib = corelib("3.1");
    golden_pair("il-vars-corelib31-appcontext-setup", &["il", "vars", &corelib, "--method", "0x06000099"], &with_setup_rvas(&corelib));
}

/// tests/fixtures/r2r/Frames.dll: a ReadyToRun image of our own, the same on every machine.
#[test]
fn il_frame_of_an_image() {
    let image = repo("tests/fixtures/r2r/Frames.dll");
    golden_pair("il-frame-r2r-funclet", &["il", "frame", &image, "0x11DBF"], &[]);
    golden_pair("il-frame-r2r-inner", &["il", "frame", &image, "0x11945"], &[]);
}
