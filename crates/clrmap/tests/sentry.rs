//! symbolic-ppdb's own assertions (getsentry/symbolic, `symbolic-ppdb/tests/test_ppdb.rs` and
//! `test_caches.rs`), on its fixtures (tests/fixtures/sentry/symbolic, README there), checked
//! against clrmap's readers: embedded source counts, names and contents, SourceLink URLs, ids
//! and line lookups. Its own test binary: it needs no runtime and no other test's support.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use clrmap::pdb::embedded::embedded_pdb;
use clrmap::pdb::sources::{hash_file, language_name};
use clrmap::pdb::PortablePdb;
use clrmap::pe::PeImage;
use clrmap::symbolizer::ModuleSymbols;

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../tests/fixtures/sentry/symbolic/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The embedded sources: (document name, text).
fn embedded(pdb: &PortablePdb<'_>) -> Vec<(String, Vec<u8>)> {
    pdb.embedded_sources().map(|s| s.unwrap()).map(|(rid, s)| (pdb.document(rid).unwrap().name, s.text(1 << 20).unwrap())).collect()
}

fn embedded_pdb_of(dll: &str) -> (Vec<u8>, [u8; 20]) {
    let bytes = read(dll);
    let image = PeImage::parse(&bytes).unwrap();
    let id = image.codeview().unwrap().unwrap().pdb_id();
    (embedded_pdb(&image).unwrap().unwrap(), id)
}

fn check_contents(text: &[u8], len: usize, name: &str) {
    assert_eq!(text.len(), len, "{name}");
    assert_eq!(text, read(&format!("contents/{name}")), "{name}");
}

#[test]
fn symbolic_embedded_sources_missing() {
    let bytes = read("portable.pdb");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    assert!(pdb.embedded_sources().next().is_none());
}

#[test]
fn symbolic_embedded_sources_names_and_contents() {
    let bytes = read("Sentry.Samples.Console.Basic.pdb");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    let items = embedded(&pdb);
    assert_eq!(items.len(), 4);
    let root = "C:\\dev\\sentry-dotnet\\samples\\Sentry.Samples.Console.Basic\\";
    let names: Vec<String> = items.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        names,
        [
            format!("{root}Program.cs"),
            format!("{root}obj\\release\\net6.0\\Sentry.Samples.Console.Basic.GlobalUsings.g.cs"),
            format!("{root}obj\\release\\net6.0\\.NETCoreApp,Version=v6.0.AssemblyAttributes.cs"),
            format!("{root}obj\\release\\net6.0\\Sentry.Samples.Console.Basic.AssemblyInfo.cs"),
        ]
    );
    check_contents(&items[0].1, 204, "Program.cs");
    check_contents(&items[1].1, 295, "Sentry.Samples.Console.Basic.GlobalUsings.g.cs");
    check_contents(&items[2].1, 198, ".NETCoreApp,Version=v6.0.AssemblyAttributes.cs");
    check_contents(&items[3].1, 1019, "Sentry.Samples.Console.Basic.AssemblyInfo.cs");
    // Each embedded text is the file the document's hash names.
    for rid in 1..=pdb.document_count() {
        let doc = pdb.document_info(rid).unwrap();
        if let Some(source) = pdb.embedded_source(rid).unwrap() {
            assert_eq!(hash_file(&doc.hash_algorithm, &source.text(1 << 20).unwrap()), Some(doc.hash.clone()), "{}", doc.name);
            assert_eq!(language_name(&doc.language), Some("csharp"));
        }
    }
}

#[test]
fn symbolic_embedded_sources_with_metadata_maui() {
    let bytes = read("Sentry.Samples.Maui.pdb");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    assert_eq!(embedded(&pdb).len(), 5);
}

#[test]
fn symbolic_matching_ids() {
    let pdb_bytes = read("portable.pdb");
    let pdb = PortablePdb::parse(&pdb_bytes).unwrap();
    let dll = read("integration.dll");
    let image = PeImage::parse(&dll).unwrap();
    assert_eq!(image.codeview().unwrap().unwrap().pdb_id(), pdb.id().0);
}

#[test]
fn symbolic_pe_embedded_ppdb_without_sources() {
    let (bytes, id) = embedded_pdb_of("Sentry.Samples.Console.Basic-embedded-ppdb.dll");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    assert_eq!(pdb.id().0, id);
    assert!(pdb.method_count() > 0);
    assert!(pdb.embedded_sources().next().is_none());
}

#[test]
fn symbolic_pe_embedded_ppdb_with_sources() {
    let (bytes, id) = embedded_pdb_of("Sentry.Samples.Console.Basic-embedded-ppdb-with-sources.dll");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    assert_eq!(pdb.id().0, id);
    assert!(pdb.method_count() > 0);
    let items = embedded(&pdb);
    assert_eq!(items.len(), 5);
    check_contents(&items[0].1, 204, "Program.cs");
    check_contents(&items[1].1, 295, "Sentry.Samples.Console.Basic.GlobalUsings.g.cs");
    check_contents(&items[2].1, 198, ".NETCoreApp,Version=v6.0.AssemblyAttributes.cs");
    check_contents(&items[3].1, 610, "Sentry.Attributes.cs");
    check_contents(&items[4].1, 1019, "Sentry.Samples.Console.Basic.AssemblyInfo.cs");
}

#[test]
fn symbolic_source_links() {
    let bytes = read("ppdb-sourcelink-sample.pdb");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    let names: Vec<String> = embedded(&pdb).into_iter().map(|(n, _)| n.rsplit(['\\', '/']).next().unwrap().to_owned()).collect();
    assert_eq!(names, [".NETStandard,Version=v2.0.AssemblyAttributes.cs", "ppdb-sourcelink-sample.AssemblyInfo.cs"]);
    let map = pdb.source_link().unwrap().unwrap();
    let src_prefix = "C:\\dev\\symbolic\\";
    let url_prefix = "https://raw.githubusercontent.com/getsentry/symbolic/9f7ceefc29da4c45bc802751916dbb3ea72bf08f/";
    assert!(pdb.document_count() > 0);
    for rid in 1..=pdb.document_count() {
        let doc = pdb.document(rid).unwrap();
        let expected = doc.name.replace(src_prefix, url_prefix).replace('\\', "/");
        assert_eq!(map.url(&doc.name), Some(expected));
    }
}

#[test]
fn symbolic_has_source_links() {
    let bytes = read("ppdb-sourcelink-sample.pdb");
    assert!(PortablePdb::parse(&bytes).unwrap().source_link().unwrap().is_some());
    let bytes = read("portable.pdb");
    assert!(PortablePdb::parse(&bytes).unwrap().source_link().unwrap().is_none());
    let bytes = read("source-links-only.pdb");
    let pdb = PortablePdb::parse(&bytes).unwrap();
    assert!(pdb.source_link().unwrap().is_some());
    assert!(pdb.embedded_sources().next().is_none());
}

#[test]
fn symbolic_caches_documents_and_async_parse() {
    for name in ["Documents.pdbx", "Async.pdbx"] {
        let bytes = read(name);
        let pdb = PortablePdb::parse(&bytes).unwrap();
        for rid in 1..=pdb.document_count() {
            pdb.document_info(rid).unwrap();
        }
        for rid in 1..=pdb.method_count() {
            for p in pdb.sequence_points(0x0600_0000 | rid).unwrap() {
                p.unwrap();
            }
        }
    }
}

#[test]
fn symbolic_caches_integration_lookups() {
    let lines = ModuleSymbols::from_pdb(read("portable.pdb")).unwrap();
    let file = "/Users/swatinem/Coding/sentry-dotnet/samples/foo/Program.cs";
    for (method, il, line) in [(7, 10, 81), (5, 6, 37), (3, 0, 30), (2, 0, 25), (1, 45, 20)] {
        let (got, _, name) = lines.line(0x0600_0000 | method, il).unwrap();
        assert_eq!((got, name), (line, Some(file)), "method {method} IL {il}");
    }
}
