//! What a new user meets first, said in their terms: the symbol options every command that
//! reads PDBs shares.

use crate::support::*;

#[test]
fn commands_that_read_pdbs_share_the_symbol_options() {
    let commands: [&[&str]; 10] =
        [&["symbolize"], &["il", "at"], &["il", "vars"], &["pdb", "lines"], &["pdb", "sources"], &["perf", "jitdump"], &["perf", "map"], &["stacktrace"], &["serve"], &["flame"]];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let o = clrmap(&args);
        assert_eq!(code(&o), Some(0), "{command:?}");
        let help = stdout(&o);
        for flag in ["--symbol-path <DIR>", "--symbol-server <URL>", "--cache <DIR>", "--symbol-timeout <DURATION>"] {
            assert_eq!(help.matches(flag).count(), 1, "{command:?} --help: {flag}\n{help}");
        }
    }
    // The two whose directories mean more keep saying so.
    let o = clrmap(&["stacktrace", "--help"]);
    assert!(stdout(&o).contains("the module's assembly (`DIR/Shop.dll`"), "{}", stdout(&o));
    let o = clrmap(&["serve", "--help"]);
    assert!(stdout(&o).contains("A directory to look for PDBs and assemblies in"), "{}", stdout(&o));
}
