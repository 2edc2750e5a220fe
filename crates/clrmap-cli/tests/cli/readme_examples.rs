//! The README's examples print what the README says they print: every `console` block whose
//! commands run here (no process, perf or app of the reader's own) is run from the repository's
//! root by bash, with `clrmap` on PATH and `FW`/`FW8` set as the README sets them, and its output
//! compared line by line with the block.

use std::process::Command;

use super::support::*;

/// A block's commands (`$ ` lines) and, after each, the output the README shows for it.
fn examples(block: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(cmd) => out.push((cmd.to_owned(), String::new())),
            None => {
                if let Some((_, expected)) = out.last_mut() {
                    expected.push_str(line);
                    expected.push('\n');
                }
            }
        }
    }
    out
}

/// Commands that need something of the reader's own: a process, perf, an app, a tool outside
/// the repository, or output that is not meant to be compared.
fn runs_here(cmd: &str) -> bool {
    let own = ["PID", "5111", "1234", "app.", "perf ", "inferno", "&", "export ", "dotnet "];
    !own.iter().any(|o| cmd.contains(o))
}

/// One line: `...` inside a line stands for any text (`{"entries":[{...},...]}`).
fn line_matches(got: &str, want: &str) -> bool {
    let mut parts = want.split("...");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = got.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `got` is what the README shows: line for line, where a line `...` (indented or not) stands for any
/// number of lines (the README shortens long outputs so).
fn matches(got: &str, expected: &str) -> bool {
    fn go(got: &[&str], want: &[&str]) -> bool {
        match want.split_first() {
            None => got.is_empty(),
            Some((w, rest)) if w.trim() == "..." => (0..=got.len()).any(|skip| go(got.get(skip..).unwrap_or(&[]), rest)),
            Some((w, rest)) => got.split_first().is_some_and(|(g, grest)| line_matches(g.trim_end(), w.trim_end()) && go(grest, rest)),
        }
    }
    let got: Vec<&str> = got.trim_end().lines().collect();
    let want: Vec<&str> = expected.trim_end().lines().collect();
    go(&got, &want)
}

fn readme_blocks() -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    text.split("```console\n").skip(1).filter_map(|b| b.split("```").next().map(str::to_owned)).collect()
}

fn check(needs_dotnet: bool) {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_clrmap")).parent().unwrap().to_owned();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let mut checked = 0;
    let mut failures = Vec::new();
    // Variables the README sets (`FW=...`) hold for every later command.
    let mut setup = String::new();
    for block in readme_blocks() {
        for (cmd, expected) in examples(&block) {
            let shell = cmd.split("   #").next().unwrap_or(&cmd).trim().to_owned();
            if shell.starts_with("FW") && shell.contains('=') {
                setup.push_str(&shell);
                setup.push('\n');
                continue;
            }
            if !shell.contains("clrmap") || !runs_here(&shell) || shell.contains("$FW") != needs_dotnet || expected.trim().is_empty() {
                continue;
            }
            let o = Command::new("bash")
                .arg("-c")
                .arg(format!("set -o pipefail\n{setup}{shell}"))
                .current_dir(repo_root())
                .env_clear()
                .env("PATH", &path)
                .env("HOME", std::env::temp_dir())
                .output()
                .unwrap();
            let got = stdout(&o);
            checked += 1;
            // An error example shows what goes to stderr.
            if !matches(&got, &expected) && !matches(&format!("{got}{}", stderr(&o)), &expected) {
                failures.push(format!("$ {shell}\n--- README\n{expected}--- printed (exit {:?})\n{got}{}", code(&o), stderr(&o)));
            }
        }
    }
    assert!(checked >= if needs_dotnet { 3 } else { 8 }, "only {checked} examples checked");
    assert!(failures.is_empty(), "{} of {checked} README examples print something else:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn the_readmes_examples_print_what_it_shows() {
    check(false);
}

#[test]
#[ignore = "needs .NET"]
fn the_readmes_examples_on_the_installed_runtimes_print_what_it_shows() {
    check(true);
}

/// The `--inlines` example read where 8.0.4's framework is not: the inlinees are `??`, and a
/// note says which assembly was missing and every place it was looked for, the installed .NETs'
/// same framework version among them.
#[test]
fn a_missing_assembly_is_named_with_every_place_looked() {
    let o = clrmap(&["symbolize", "tests/fixtures/inlines/attach-8.0.4.nettrace", "--inlines", "0x7fe94a439446"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let note = err.lines().find(|l| l.starts_with("note: System.Linq.dll: no assembly of the recorded build was found at ")).unwrap_or_else(|| panic!("{err}"));
    assert!(note.contains("/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.4/System.Linq.dll"), "{note}");
    assert!(note.ends_with("its inlined methods are not named"), "{note}");
    // Once, however many inlinees of the module the answer holds.
    assert_eq!(err.matches("no assembly of the recorded build").count(), 1, "{err}");
}
