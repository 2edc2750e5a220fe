//! The library's folders are its floors (ARCHITECTURE.md): each module imports only modules on
//! its own floor or below, and the modules of one floor import each other without a cycle.
//! Read from the source text, so a new import that runs back up fails here, in the fast lane.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::rust_files;

/// The floors from the ground up, and the modules on each (their folders under `src/`).
const FLOORS: &[(&str, &[&str])] = &[
    ("base", &["read", "json", "fs", "guid", "ilmap"]),
    ("formats", &["pe", "signature", "metadata", "pdb", "r2r", "inlines", "gdmap", "nettrace", "capture"]),
    ("symbols", &["symsrv", "source", "locate", "module", "why"]),
    ("answers", &["symbolizer", "stacktrace"]),
    ("outputs", &["profile", "jitdump"]),
    ("live", &["diag", "dump"]),
    ("service", &["service"]),
];

/// Files that only tests and fuzzing build (`cfg(any(test, feature = "testing"))`). They keep to
/// the floors too: a check that holds a lower floor against a higher one lives on the higher floor.
const TEST_ONLY: &[&str] = &["fuzzcheck.rs", "fake.rs", "tests.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module (of `FLOORS`) a file under `src/FLOOR/` belongs to: its first path component below
/// the floor folder, without `.rs`.
fn module_of(file: &Path) -> Option<(usize, &'static str)> {
    let rel = file.strip_prefix(src()).ok()?;
    let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let floor = parts.next()?;
    // `service/` is a floor and its one module at once.
    let first = if floor == "service" { floor.clone() } else { parts.next().unwrap_or_else(|| floor.clone()) };
    let first = first.trim_end_matches(".rs").to_owned();
    FLOORS.iter().enumerate().find(|(_, (f, _))| *f == floor).and_then(|(i, (_, mods))| mods.iter().find(|m| **m == first).map(|m| (i, *m)))
}

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, mods)| mods.contains(&module))
}

/// The modules a file imports by `crate::NAME`, outside comments and outside a `#[cfg(test)]`
/// tail (a file's unit tests come last in it).
fn imports(text: &str) -> BTreeSet<String> {
    let body = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut out = BTreeSet::new();
    for line in body.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let mut name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // The library names modules by their floors' paths (`crate::formats::pdb`); the
            // re-exports at the root (`crate::pdb`) are for users only.
            if FLOORS.iter().any(|(floor, _)| *floor == name && *floor != "service") {
                let after = &rest[name.len()..];
                name = after.strip_prefix("::").unwrap_or("").chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            }
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The library reaches its modules by their floors' paths, never through the root's re-exports,
/// so that every import shows which floor it reaches.
#[test]
fn the_library_names_modules_by_their_floors() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut short = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("lib.rs")) {
        for (i, line) in std::fs::read_to_string(file).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (_, mods) in FLOORS.iter().filter(|(f, _)| *f != "service") {
                for m in *mods {
                    if code.contains(&format!("crate::{m}::")) || code.contains(&format!("crate::{m};")) {
                        short.push(format!("{}:{}: crate::{m}", file.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(short.is_empty(), "use the floor's path:\n{}", short.join("\n"));
}

#[test]
fn no_import_runs_from_a_lower_floor_back_up_and_no_floor_has_a_cycle() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut up = Vec::new();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy();
        let floor_file = name == "mod.rs" && file.parent().and_then(Path::parent) == Some(src().as_path()) && !file.starts_with(src().join("service"));
        if file.parent() == Some(src().as_path()) || floor_file {
            continue; // lib.rs and the floors' own mod.rs files only declare
        }
        let Some((floor, module)) = module_of(file) else {
            unplaced.push(file.clone());
            continue;
        };
        for import in imports(&std::fs::read_to_string(file).unwrap()) {
            let Some(to) = floor_of(&import) else { continue };
            if to > floor {
                up.push(format!("{} imports crate::{import} ({} is above {})", file.display(), FLOORS[to].0, FLOORS[floor].0));
            }
            if import != module {
                let target = FLOORS[to].1.iter().find(|m| **m == import).unwrap();
                graph.entry(module).or_default().insert(target);
            }
        }
    }
    assert!(unplaced.is_empty(), "files in no module of a floor (add them to FLOORS and ARCHITECTURE.md): {unplaced:?}");
    assert!(up.is_empty(), "imports that run back up:\n{}", up.join("\n"));
    // A cycle among modules: a depth-first search that meets a module on its own path.
    fn visit<'a>(m: &'a str, graph: &BTreeMap<&'a str, BTreeSet<&'a str>>, path: &mut Vec<&'a str>, done: &mut BTreeSet<&'a str>) -> Option<Vec<&'a str>> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            return Some(path[i..].to_vec());
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        let cycle = visit(m, &graph, &mut Vec::new(), &mut done);
        assert!(cycle.is_none(), "modules that import each other in a circle: {cycle:?}");
    }
}

/// Every file `TEST_ONLY` lets reach up is built only for tests and fuzzing: its `mod` line (in its
/// folder's `mod.rs`) carries `#[cfg(test)]` or `#[cfg(any(test, feature = "testing"))]`, so no
/// user of the library builds it. Each name of the list is there to be checked.
#[test]
fn test_only_files_are_built_only_for_tests() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut names = BTreeSet::new();
    let mut open = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !TEST_ONLY.contains(&name.as_str()) {
            continue;
        }
        let decl = format!("mod {};", name.trim_end_matches(".rs"));
        let parent = std::fs::read_to_string(file.parent().unwrap().join("mod.rs")).unwrap();
        let lines: Vec<&str> = parent.lines().map(str::trim).collect();
        let guarded = lines
            .iter()
            .position(|l| l.trim_start_matches("pub ") == decl)
            .is_some_and(|i| lines[..i].iter().rev().take_while(|l| l.starts_with("#[")).any(|l| *l == "#[cfg(test)]" || *l == r#"#[cfg(any(test, feature = "testing"))]"#));
        if !guarded {
            open.push(file.display().to_string());
        }
        names.insert(name);
    }
    assert!(open.is_empty(), "test-only files built without cfg(test) or the testing feature:\n{}", open.join("\n"));
    assert_eq!(names.len(), TEST_ONLY.len(), "names of TEST_ONLY no file has: {TEST_ONLY:?} vs {names:?}");
}

#[test]
fn the_import_reader_sees_imports_and_skips_comments() {
    let got =
        imports("use crate::formats::pdb::X;\n/// [`crate::answers::symbolizer::Y`]\nlet a = crate::base::fs::read(); // crate::diag\nuse crate::service::Z;\n#[cfg(test)]\nuse crate::live::dump;\n");
    assert_eq!(got.into_iter().collect::<Vec<_>>(), ["fs", "pdb", "service"]);
}
