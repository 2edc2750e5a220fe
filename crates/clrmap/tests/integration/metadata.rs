//! Metadata against the real runtimes: every assembly of both shared frameworks parses, every
//! table iterates, every TypeSpec/MethodSpec decodes, and the rendering equals an independent
//! oracle (System.Reflection.Metadata with a provider written from the contract) line for line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clrmap::gdmap::DictionaryMap;
use clrmap::gdmap::{instantiation_map, method_spec_rva, type_spec_rva};
use clrmap::metadata::{schema, spec_lines, table, Metadata, SpecMethod};

use crate::support::{self, run, runtime31, runtimes, Runtime};

/// Both runtimes, the 3.1 runtime that hosts the oracle, mcs, and the compiled oracle (support
/// fails the test when one is missing).
fn oracle_setup(test: &str) -> (Vec<Runtime>, Runtime, PathBuf, PathBuf) {
    let (rts, mcs) = support::runtimes_and_mcs(test);
    let rt31 = runtime31().unwrap();
    let oracle = support::srm_oracle(&rt31, &mcs);
    (rts, rt31, mcs, oracle)
}

/// clrmap's `meta specs` text for one file, as the oracle prints it.
fn clrmap_lines(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let md = Metadata::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    spec_lines(&md, &md)
        .into_iter()
        .map(|l| match l.full_text() {
            Ok(t) => format!("0x{:08X}\t{t}", l.token),
            Err(e) => panic!("{}: 0x{:08X} does not decode: {e}", path.display(), l.token),
        })
        .collect()
}

/// The oracle's output, split per file.
fn oracle_lines(rt: &Runtime, oracle: &Path, files: &[PathBuf]) -> HashMap<PathBuf, Vec<String>> {
    let text = run(Command::new(&rt.dotnet).arg(oracle).args(files));
    let mut out: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("== ") {
            current = Some(PathBuf::from(p));
            out.entry(PathBuf::from(p)).or_default();
        } else if let Some(p) = &current {
            out.get_mut(p).unwrap().push(line.to_owned());
        }
    }
    out
}

#[test]
fn a_methodspec_prints_with_the_method_it_instantiates() {
    // Frames.dll's MethodSpecs name a MethodDef, a MemberRef on a TypeRef and a MemberRef on a
    // TypeSpec (a method of a generic instantiation); each with its parameter types.
    let bytes = std::fs::read(support::fixture("tests/fixtures/frames/debug-portable/Frames.dll")).unwrap();
    let md = Metadata::parse(&bytes).unwrap();
    let lines = spec_lines(&md, &md);
    let line = |token: u32| lines.iter().find(|l| l.token == token).unwrap();
    let cases = [
        (0x2B00_0001, 0x0600_0000, "<string>", "Frames.Generic::Pass<string>(!!0)"),
        (
            0x2B00_0004,
            0x0A00_0000,
            "<int32>",
            "[System.Linq]System.Linq.Enumerable::Where<int32>(class [System.Private.CoreLib]System.Collections.Generic.IEnumerable`1<!!0>,class [System.Private.CoreLib]System.Func`2<!!0,bool>)",
        ),
        (0x2B00_000C, 0x0A00_0000, "<int32>", "class Frames.Box`1<string>::Map<int32>(class [System.Private.CoreLib]System.Func`2<!0,!!0>)"),
    ];
    for (token, table, args, full) in cases {
        let l = line(token);
        assert_eq!(l.text.as_deref(), Ok(args), "0x{token:08X}");
        assert_eq!(l.full_text().as_deref(), Ok(full), "0x{token:08X}");
        let m = l.method.as_ref().unwrap();
        assert_eq!(m.token >> 24, table >> 24, "0x{token:08X}");
        let (name, params) = m.texts().unwrap();
        assert!(full.starts_with(&format!("{name}<")) && full.ends_with(params));
    }
    // A TypeSpec line is its type alone.
    assert!(line(0x1B00_0001).method.is_none());
    assert_eq!(line(0x1B00_0001).full_text(), line(0x1B00_0001).text);
}

#[test]
#[ignore = "needs .NET"]
fn every_spec_of_both_frameworks_matches_the_srm_oracle() {
    let (rts, _, _, oracle) = oracle_setup("metadata::every_spec_of_both_frameworks_matches_the_srm_oracle");
    for rt in &rts {
        let files = rt.assemblies();
        // Each framework read by its own runtime's SRM.
        let expected = oracle_lines(rt, &oracle, &files);
        let (mut type_specs, mut method_specs) = (0usize, 0usize);
        for f in &files {
            let ours = clrmap_lines(f);
            let theirs = expected.get(f).unwrap_or_else(|| panic!("oracle skipped {}", f.display()));
            assert!(!theirs.iter().any(|l| l.contains("!error") || l.contains("!not-an-assembly")), "{}", f.display());
            assert_eq!(&ours, theirs, "{}", f.display());
            type_specs += ours.iter().filter(|l| l.starts_with("0x1B")).count();
            method_specs += ours.iter().filter(|l| l.starts_with("0x2B")).count();
        }
        println!("{}: {} assemblies, {type_specs} TypeSpecs and {method_specs} MethodSpecs equal to SRM", rt.version, files.len());
        assert!(files.len() > 150 && type_specs > 5_000 && method_specs > 3_000, "too little data");
    }
}

#[test]
#[ignore = "needs .NET"]
fn every_table_of_every_assembly_iterates_and_every_method_has_a_name() {
    for rt in runtimes("metadata::every_table_of_every_assembly_iterates") {
        let (mut rows, mut methods) = (0u64, 0u64);
        for f in rt.assemblies() {
            let bytes = std::fs::read(&f).unwrap();
            let md = Metadata::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for id in 0..=table::GENERIC_PARAM_CONSTRAINT {
                let t = md.tables().table(id);
                let n = schema::columns(id).unwrap().len();
                let mut count = 0;
                for row in t.iter() {
                    for c in 0..n {
                        row.get(c).unwrap();
                    }
                    // A column past the schema's is an error at the row, never a silent 0.
                    let e = row.get(n).unwrap_err();
                    assert_eq!((e.kind, e.offset()), (clrmap::ErrorKind::NotFound, Some(row.offset())));
                    count += 1;
                }
                assert_eq!(count, t.len(), "{} table 0x{id:02X}", f.display());
                rows += u64::from(t.len());
            }
            // Every TypeDef and TypeRef has a name, and every MethodDef an owner and a name.
            for rid in 1..=md.tables().rows(table::TYPE_DEF) {
                md.type_name(0x0200_0000 | rid).unwrap();
            }
            for rid in 1..=md.tables().rows(table::TYPE_REF) {
                md.type_name(0x0100_0000 | rid).unwrap();
            }
            for rid in 1..=md.tables().rows(table::METHOD_DEF) {
                let name = md.method_name(0x0600_0000 | rid).unwrap();
                assert!(name.contains("::"), "{name}");
                methods += 1;
            }
        }
        println!("{}: {rows} rows in all tables, {methods} method names", rt.version);
        assert!(methods > 100_000);
    }
}

#[test]
#[ignore = "needs .NET"]
fn corelib_instantiation_map_renders_like_the_oracle() {
    let (rts, _, _, oracle) = oracle_setup("metadata::corelib_instantiation_map_renders_like_the_oracle");
    for rt in &rts {
        let corelib = rt.framework.join("System.Private.CoreLib.dll");
        let expected = oracle_lines(rt, &oracle, std::slice::from_ref(&corelib));
        let by_token: HashMap<u32, &str> = expected[&corelib]
            .iter()
            .map(|l| {
                let (tok, text) = l.split_once('\t').unwrap();
                (u32::from_str_radix(tok.trim_start_matches("0x"), 16).unwrap(), text)
            })
            .collect();
        let bytes = std::fs::read(&corelib).unwrap();
        let md = Metadata::parse(&bytes).unwrap();
        for sorted in [true, false] {
            let map_bytes = instantiation_map(&md, sorted).unwrap();
            let map = DictionaryMap::parse(&map_bytes).unwrap();
            map.validate().unwrap();
            assert_eq!(map.is_sorted_flag_set(), sorted);
            let mut checked = 0;
            for e in map.entries() {
                let types = map.item_of(&e).unwrap().render(&md).unwrap().join(",");
                let token = if e.rva >= method_spec_rva(0) { 0x2B00_0000 | ((e.rva - method_spec_rva(0)) / 16) } else { 0x1B00_0000 | ((e.rva - type_spec_rva(0)) / 16) };
                let want = format!("<{types}>");
                let theirs = by_token[&token];
                if token >> 24 == 0x2B {
                    // A MethodSpec renders as `Owner::Method<args>(params)`: its arguments are
                    // the entry's item.
                    let m = SpecMethod::new(&md, md.method_spec(token & 0x00FF_FFFF).unwrap().method);
                    let (name, params) = m.texts().unwrap();
                    let want = format!("{name}{want}{params}");
                    assert_eq!(theirs, want, "0x{token:08X}");
                } else {
                    // A TypeSpec renders as `class G<args>`: its argument list is the entry's item.
                    assert!(theirs.ends_with(&want), "0x{token:08X}: oracle {theirs}, map {want}");
                }
                checked += 1;
            }
            println!("{}: CoreLib map (sorted={sorted}) {checked} entries equal to SRM", rt.version);
            assert!(checked > 1000);
        }
    }
}

#[test]
#[ignore = "needs .NET"]
fn every_name_form_matches_the_oracle_on_a_compiled_fixture() {
    let (_, rt31, mcs, oracle) = oracle_setup("metadata::every_name_form");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("names-fixture");
    std::fs::create_dir_all(&dir).unwrap();
    let src = support::repo_root().join("tests/dotnet/names");
    let module = dir.join("Mod.netmodule");
    support::mcs_compile(&mcs, &module, &["-target:module"], &[src.join("Mod.cs")]);
    let dll = dir.join("Names.dll");
    support::mcs_compile(&mcs, &dll, &["-target:library", &format!("-addmodule:{}", module.display())], &[src.join("Names.cs")]);
    let expected = oracle_lines(&rt31, &oracle, std::slice::from_ref(&dll));
    let ours = clrmap_lines(&dll);
    assert_eq!(&ours, &expected[&dll]);
    let text = ours.join("\n");
    // Hand-checked forms of docs/output.md#type-signatures.
    for want in [
        "<class NoNamespace`1/Nested`1<int32,string>>",
        "<class Fixture.Outer`1/Inner`1<int32,int64>>",
        // mcs writes `[,]` with explicit lower bounds 0 and no sizes.
        "<valuetype Fixture.Outer`1/Inner`1/Deepest<int32,int64>[0...,0...]>",
        "<valuetype [mscorlib]System.Collections.Generic.Dictionary`2/Enumerator<string,class [mscorlib]System.Collections.Generic.List`1<int32>>>",
        // mcs scopes a linked netmodule's types to the assembly itself (an AssemblyRef named
        // after it), not to a ModuleRef.
        "<class [Names]ModNs.Helper`1<int32>>",
        "<class [Names]ModNs.Helper`1/Inner<string>>",
        "<int32[][]>",
    ] {
        assert!(text.contains(want), "missing {want} in:\n{text}");
    }
}
