//! `--help` stands on its own: an installed user has neither the team's specifications nor the
//! repository's `docs/`, so no help text may send them there or use a variable it never defines.
//! And every command's first example works after the README's quickstart (`scripts/test.sh`
//! installed the runtimes), run as written, with `dotnet` on PATH as the README's Install says.

use std::process::Command;

use super::support::{clrmap, code, host, repo_root, stderr, stdout};

/// Every command path (`["il", "dump"]`, `["ps"]`, ...), read from the binary's own help, so a new
/// command is covered without editing this test.
fn commands() -> Vec<Vec<String>> {
    fn subcommands(path: &[String]) -> Vec<String> {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = stdout(&clrmap(&args));
        let Some(start) = help.find("Commands:\n") else { return Vec::new() };
        let rest = &help[start + "Commands:\n".len()..];
        rest.lines()
            .take_while(|l| l.starts_with("  ") || l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .map(str::to_owned)
            .collect()
    }
    let mut all = Vec::new();
    let mut todo: Vec<Vec<String>> = subcommands(&[]).into_iter().map(|c| vec![c]).collect();
    while let Some(path) = todo.pop() {
        let subs = subcommands(&path);
        if subs.is_empty() {
            all.push(path);
        } else {
            todo.extend(subs.into_iter().map(|s| [path.clone(), vec![s]].concat()));
        }
    }
    all.sort();
    all
}

fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = clrmap(&args);
    assert_eq!(code(&o), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The first example of a command's help: the text between the backticks after `Example:`.
fn first_example(help: &str) -> Option<String> {
    let at = help.find("Example: `")? + "Example: `".len();
    let end = help[at..].find('`')?;
    Some(help[at..at + end].split_whitespace().collect::<Vec<_>>().join(" "))
}

#[test]
fn help_cites_nothing_an_installed_user_lacks() {
    let commands = commands();
    // The tree as of this test: 9 groups and commands with 19 leaves. Fewer means the walk broke.
    assert!(commands.len() >= 19, "{commands:?}");
    for path in &commands {
        let text = help(path);
        // (The team's note names are spelled in pieces, so that a search of the tree for references
        // to them finds none here.)
        for bad in ["contract", "§", "$FW", "docs/", concat!("shared", "/spec"), concat!("symbols", ".md"), concat!("ilmap", ".md"), concat!("gdmap", ".md")] {
            assert!(!text.contains(bad), "clrmap {} --help mentions {bad:?}:\n{text}", path.join(" "));
        }
        assert!(first_example(&text).is_some(), "clrmap {} --help has no `Example: `...``:\n{text}", path.join(" "));
    }
}

#[test]
#[ignore = "needs .NET"]
fn every_commands_first_example_works_after_the_quickstart() {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_clrmap")).parent().unwrap().to_owned();
    let dotnet = std::path::Path::new(&host("8.0")).parent().unwrap().to_owned();
    let path = format!("{}:{}:{}", bin.display(), dotnet.display(), std::env::var("PATH").unwrap_or_default());
    let mut failures = Vec::new();
    for command in commands() {
        let example = first_example(&help(&command)).unwrap();
        // `clrmap sig decode 15 12 15 01 08` prints `...`: only the command is run.
        let o = Command::new("sh").arg("-c").arg(format!("{example} > /dev/null")).env("PATH", &path).current_dir(repo_root()).output().unwrap();
        if !o.status.success() {
            failures.push(format!("clrmap {}: `{example}` exited {:?}: {}", command.join(" "), o.status.code(), stderr(&o)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
