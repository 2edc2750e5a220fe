//! The sample profiler's stacks in a trace (`nettrace::read_samples`) and the flame
//! profiles made from them (`clrmap::profile`). Synthetic traces come from
//! `nettrace::TraceWriter`; the stack reader is also checked on a real 8.0.4 trace's stack block.

use clrmap::nettrace::{read_samples, stack_block, TraceWriter, SAMPLE_PROFILER};

use crate::support;

/// A trace of `blocks`: each is (stacks from id 1 or a sequence point, then samples).
const META: u32 = 1;

fn writer(pointer: u32) -> TraceWriter<Vec<u8>> {
    let mut w = TraceWriter::new(Vec::new(), pointer, 1_000_000, 42).unwrap();
    w.metadata(&[(META, SAMPLE_PROFILER, 0), (2, "Other-Provider", 0)]).unwrap();
    w
}

type Got = Vec<(u64, Vec<u64>, bool)>;

fn samples(bytes: &[u8]) -> (Got, clrmap::nettrace::Stats, Option<clrmap::Error>) {
    let mut got = Vec::new();
    let (stats, fault) = read_samples(bytes, |s| got.push((s.thread_id, s.frames.to_vec(), s.managed))).unwrap();
    (got, stats, fault)
}

#[test]
fn samples_come_with_their_stacks_leaf_first() {
    let mut w = writer(8);
    let a: &[u64] = &[0x7f00_0000_1010, 0x7f00_0000_2020, 0x7f00_0000_3030];
    let b: &[u64] = &[0x7f00_0000_4040];
    w.stacks(1, &[a, b], 8).unwrap();
    w.events(&[(META, 7, 1, 10, &1u32.to_le_bytes()), (META, 8, 2, 10, &2u32.to_le_bytes()), (2, 7, 1, 1, &[]), (META, 7, 2, 10, &1u32.to_le_bytes())]).unwrap();
    let bytes = w.finish().unwrap();
    let (got, stats, fault) = samples(&bytes);
    assert!(fault.is_none(), "{fault:?}");
    // Type 1 is external code, 2 managed (the runtime's ep-types.h).
    assert_eq!(got, vec![(7, a.to_vec(), false), (8, b.to_vec(), true), (7, b.to_vec(), false)]);
    assert_eq!((stats.samples, stats.stacks, stats.unknown_stack_ids, stats.stacks_dropped), (3, 2, 0, 0));
    assert_eq!((stats.pointer_size, stats.sampling_rate_ns, stats.process_id), (Some(8), Some(1_000_000), Some(42)));
    // The other provider's event with a stack is no sample.
    assert_eq!(stats.events.get(&("Other-Provider".to_string(), 0, 0)), Some(&1));
}

#[test]
fn a_32_bit_trace_reads_4_byte_addresses() {
    let mut w = TraceWriter::new(Vec::new(), 4, 1_000_000, 1).unwrap();
    w.metadata(&[(META, SAMPLE_PROFILER, 0)]).unwrap();
    w.stacks(1, &[&[0x1000_2000, 0x3000_4000]], 4).unwrap();
    w.events(&[(META, 3, 1, 1, &2u32.to_le_bytes())]).unwrap();
    let (got, _, fault) = samples(&w.finish().unwrap());
    assert!(fault.is_none(), "{fault:?}");
    assert_eq!(got, vec![(3, vec![0x1000_2000, 0x3000_4000], true)]);
}

#[test]
fn stack_ids_start_again_after_a_sequence_point_and_unknown_ids_are_counted() {
    let mut w = writer(8);
    w.stacks(1, &[&[0xA1], &[0xA2]], 8).unwrap();
    w.events(&[(META, 1, 1, 1, &1u32.to_le_bytes()), (META, 1, 9, 1, &1u32.to_le_bytes())]).unwrap();
    w.sequence_point().unwrap();
    // After the sequence point, id 2 is unknown until a new block names it, and id 1 is new.
    w.events(&[(META, 1, 2, 1, &1u32.to_le_bytes())]).unwrap();
    w.stacks(1, &[&[0xB1]], 8).unwrap();
    w.events(&[(META, 1, 1, 1, &1u32.to_le_bytes()), (META, 1, 0, 1, &1u32.to_le_bytes())]).unwrap();
    let (got, stats, fault) = samples(&w.finish().unwrap());
    assert!(fault.is_none());
    assert_eq!(got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(), vec![vec![0xA1], vec![0xB1]]);
    assert_eq!((stats.unknown_stack_ids, stats.empty_samples), (2, 1));
}

#[test]
fn stack_blocks_out_of_order_are_found_by_id() {
    let mut w = writer(8);
    w.stacks(3, &[&[0x33], &[0x44]], 8).unwrap();
    w.stacks(1, &[&[0x11], &[0x22]], 8).unwrap();
    w.events(&[(META, 1, 4, 1, &1u32.to_le_bytes()), (META, 1, 1, 1, &1u32.to_le_bytes()), (META, 1, 3, 1, &1u32.to_le_bytes())]).unwrap();
    let (got, stats, _) = samples(&w.finish().unwrap());
    assert_eq!(got.iter().map(|g| g.1[0]).collect::<Vec<_>>(), vec![0x44, 0x11, 0x33]);
    assert_eq!(stats.unknown_stack_ids, 0);
}

#[test]
fn a_torn_stack_block_keeps_its_whole_stacks() {
    // A stack whose size runs past the block, and one whose size is no multiple of 8.
    let mut body = stack_block(1, &[&[0x11, 0x12]], 8);
    body[4..8].copy_from_slice(&3u32.to_le_bytes());
    body.extend(5u32.to_le_bytes());
    body.extend([0u8; 5]);
    body.extend(64u32.to_le_bytes());
    body.extend([0u8; 8]);
    let mut w = writer(8);
    w.block("StackBlock", &body).unwrap();
    w.events(&[(META, 1, 1, 1, &1u32.to_le_bytes()), (META, 1, 2, 1, &1u32.to_le_bytes()), (META, 1, 3, 1, &1u32.to_le_bytes())]).unwrap();
    let (got, stats, fault) = samples(&w.finish().unwrap());
    assert!(fault.is_none(), "{fault:?}");
    assert_eq!(got, vec![(1, vec![0x11, 0x12], false)]);
    assert_eq!((stats.stacks, stats.stacks_dropped, stats.unknown_stack_ids), (1, 2, 2));
}

#[test]
fn a_trace_cut_anywhere_gives_a_prefix_of_the_samples() {
    let mut w = writer(8);
    let stacks: Vec<Vec<u64>> = (0..50u64).map(|i| (0..(i % 7 + 1)).map(|j| 0x7f00_0000_0000 + i * 0x100 + j).collect()).collect();
    let refs: Vec<&[u64]> = stacks.iter().map(|s| s.as_slice()).collect();
    w.stacks(1, &refs[..25], 8).unwrap();
    let ev: Vec<(u32, u64, u32, u64, &[u8])> = (1..=25u32).map(|i| (META, u64::from(i % 3), i, 5, &[1u8, 0, 0, 0][..])).collect();
    w.events(&ev).unwrap();
    w.stacks(26, &refs[25..], 8).unwrap();
    let ev: Vec<(u32, u64, u32, u64, &[u8])> = (26..=50u32).map(|i| (META, u64::from(i % 3), i, 5, &[1u8, 0, 0, 0][..])).collect();
    w.events(&ev).unwrap();
    let whole = w.finish().unwrap();
    let (all, _, fault) = samples(&whole);
    assert!(fault.is_none());
    assert_eq!(all.len(), 50);
    for cut in 0..whole.len() {
        if let Err(e) = read_samples(&whole[..cut], |_| {}) {
            assert!(cut < 100, "cut {cut}: {e}");
        }
        let mut got = Vec::new();
        if let Ok((_, fault)) = read_samples(&whole[..cut], |s| got.push((s.thread_id, s.frames.to_vec(), s.managed))) {
            assert!(fault.is_some(), "cut {cut}: no fault");
            assert_eq!(got[..], all[..got.len()], "cut {cut}");
        }
    }
}

#[test]
fn a_real_trace_stack_block_reads_whole() {
    // examples/frames.nettrace (8.0.4) has one StackBlock; every event names a stack in it.
    let bytes = std::fs::read(support::fixture("examples/frames.nettrace")).unwrap();
    let (stats, fault) = read_samples(&bytes[..], |_| {}).unwrap();
    assert!(fault.is_none());
    assert!(stats.stacks > 0 && stats.stacks_dropped == 0, "{stats:?}");
    assert_eq!((stats.pointer_size, stats.samples), (Some(8), 0));
    assert_eq!(stats.sampling_rate_ns, Some(1_000_000));
}

// ---- profiles ----

use clrmap::profile::{Format, Profile};
use clrmap::symbolizer::{FrameKind, Options, Symbolizer};

fn hot_source_line(marker: &str) -> u32 {
    let src = std::fs::read_to_string(support::fixture("tests/dotnet/perf/Hot.cs")).unwrap();
    src.lines().position(|l| l.contains(&format!("// {marker}"))).unwrap() as u32 + 1
}

fn hot_symbolizer() -> (Symbolizer, std::path::PathBuf) {
    hot_symbolizer_of("8.0.4")
}

fn hot_symbolizer_of(version: &str) -> (Symbolizer, std::path::PathBuf) {
    let trace = support::fixture(&format!("tests/fixtures/flame/hot-{version}.nettrace"));
    let options = Options { symbols: clrmap::locate::SymbolPaths { dirs: vec![support::fixture("tests/fixtures/perf")], ..Default::default() } };
    (Symbolizer::open(&trace, options).unwrap(), trace)
}

fn collapsed(p: &Profile) -> Vec<(Vec<String>, u64)> {
    let mut out = Vec::new();
    p.write_collapsed(&mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.split(';').map(str::to_owned).collect(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn the_hot_loop_line_of_real_8_0_4_and_3_1_23_traces() {
    for (version, events, major) in [("8.0.4", 1341, 8), ("3.1.23", 1252, 3)] {
        hot_loop_line(version, events, major);
    }
}

fn hot_loop_line(version: &str, events: u64, major: u16) {
    let (sym, trace) = hot_symbolizer_of(version);
    assert_eq!(sym.runtime_major(), Some(major));
    let (p, fault) = Profile::read(&sym, std::fs::File::open(&trace).unwrap(), false).unwrap();
    assert!(fault.is_none());
    let st = p.stats();
    // Every ThreadSample event is a sample, an empty stack or an unknown id: nothing is lost.
    assert_eq!(st.trace.samples + st.trace.empty_samples + st.trace.unknown_stack_ids, events);
    assert_eq!(st.trace.unknown_stack_ids, 0);
    assert_eq!(st.samples, st.trace.samples);
    assert_eq!(p.interval_ns(), 1_000_000);
    let lines = collapsed(&p);
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), st.samples);
    let own = hot_source_line("HOT-OWN");
    let fw = hot_source_line("HOT-FRAMEWORK");
    let in_own: Vec<_> = lines.iter().filter(|(s, _)| s.last().unwrap().starts_with("Hot::OwnLoop ")).collect();
    let total: u64 = in_own.iter().map(|l| l.1).sum();
    let at_line: u64 = in_own.iter().filter(|(s, _)| s.last().unwrap() == &format!("Hot::OwnLoop (Hot.cs:{own})")).map(|l| l.1).sum();
    // Every leaf is in the loop: its body's line, or the `for` line's increment and test. The
    // body holds most of the weight, as perf's samples of the same loop do (docs/flame.md,
    // "The sampler's bias": 58% body, 42% header on 8.0.31): a managed sample's leaf is read at
    // its own address, so the header's instructions keep their samples.
    let src = std::fs::read_to_string(support::fixture("tests/dotnet/perf/Hot.cs")).unwrap();
    let header = src.lines().position(|l| l.contains("for (long i = 0; i < n; i++)")).unwrap() + 1;
    let at_header: u64 = in_own.iter().filter(|(s, _)| s.last().unwrap() == &format!("Hot::OwnLoop (Hot.cs:{header})")).map(|l| l.1).sum();
    assert!(total > 200 && at_line * 2 > total && at_line + at_header == total, "{version}: {at_line} and {at_header} of {total} at lines {own} and {header}: {lines:?}");
    // Root first: Main calls OwnLoop; callers are read at their return addresses, so Main's
    // frame is the line of the call.
    let call = src.lines().position(|l| l.contains("own ^= OwnLoop(")).unwrap() + 1;
    assert!(in_own.iter().all(|(s, _)| s.len() >= 2 && s[s.len() - 2] == format!("Hot::Main (Hot.cs:{call})")), "{in_own:?}");
    // The framework loop: its calls out to string.GetHashCode are at its line.
    assert!(lines.iter().any(|(s, _)| s.iter().any(|f| f == &format!("Hot::FrameworkLoop (Hot.cs:{fw})"))));
}

#[test]
fn every_format_carries_the_same_weights() {
    let (sym, trace) = hot_symbolizer();
    let (p, _) = Profile::read(&sym, std::fs::File::open(&trace).unwrap(), true).unwrap();
    let own = hot_source_line("HOT-OWN");
    // speedscope: read as JSON (its schema's required fields), not through clrmap's types.
    let mut out = Vec::new();
    p.write(Format::Speedscope, "hot", &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["$schema"], "https://www.speedscope.app/file-format-schema.json");
    let frames = v["shared"]["frames"].as_array().unwrap();
    let hot = frames.iter().position(|f| f["file"].as_str().is_some_and(|x| x.ends_with("Hot.cs")) && f["line"] == own && f["name"].as_str().unwrap().starts_with("Hot::OwnLoop")).unwrap();
    let mut weight = 0u64;
    let mut hot_weight = 0u64;
    for prof in v["profiles"].as_array().unwrap() {
        assert_eq!(prof["type"], "sampled");
        assert_eq!(prof["unit"], "nanoseconds");
        let samples = prof["samples"].as_array().unwrap();
        let weights = prof["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len());
        let mut sum = 0;
        for (s, w) in samples.iter().zip(weights) {
            let s = s.as_array().unwrap();
            assert!(s.iter().all(|i| (i.as_u64().unwrap() as usize) < frames.len()));
            sum += w.as_u64().unwrap();
            if s.last().unwrap().as_u64() == Some(hot as u64) {
                hot_weight += w.as_u64().unwrap();
            }
        }
        assert_eq!(prof["endValue"].as_u64().unwrap(), sum);
        weight += sum;
    }
    assert_eq!(weight, p.stats().samples * 1_000_000);
    assert!(hot_weight * 2 > weight / 3, "{hot_weight} of {weight}");
    // pprof: gzip whose inflated bytes start a protobuf (field 1, length-delimited); the full
    // read is the CLI test's, by Google's profile.proto.
    let mut gz = Vec::new();
    p.write(Format::Pprof, "hot", &mut gz).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2_reader(&gz), &mut raw).unwrap();
    assert_eq!(raw[0], 0x0A);
}

fn flate2_reader(gz: &[u8]) -> impl std::io::Read + '_ {
    // The gzip member: 10-byte header, deflate, 8-byte trailer (RFC 1952), inflated here by
    // miniz_oxide, not by the writer's flate2.
    assert_eq!(&gz[..3], &[0x1f, 0x8b, 8]);
    let body = &gz[10..gz.len() - 8];
    std::io::Cursor::new(miniz_oxide::inflate::decompress_to_vec(body).unwrap())
}

/// A real trace with samples appended: an SPBlock, then stacks and ThreadSample events.
fn with_samples(real: &[u8], stacks: &[&[u64]], events: &[(u64, u32, bool)]) -> Vec<u8> {
    assert_eq!(real.last(), Some(&1));
    let body = real[..real.len() - 1].to_vec();
    let at = body.len() as u64;
    let mut w = TraceWriter::resume(body, at);
    w.sequence_point().unwrap();
    w.metadata(&[(60_000, SAMPLE_PROFILER, 0)]).unwrap();
    w.stacks(1, stacks, 8).unwrap();
    // The runtime's sample types: 2 managed, 1 external (eventpipe/ep-types.h).
    let managed = 2u32.to_le_bytes();
    let external = 1u32.to_le_bytes();
    let ev: Vec<(u32, u64, u32, u64, &[u8])> = events.iter().map(|&(t, s, m)| (60_000, t, s, 1, if m { &managed[..] } else { &external[..] })).collect();
    w.events(&ev).unwrap();
    w.finish().unwrap()
}

#[test]
fn frames_follow_the_symbolizer_leaf_return_address_and_inlines() {
    // The 8.0.4 trace with inline trees: samples at addresses inside its bodies; each frame is
    // what the symbolizer answers for that address by the frame's rule.
    let real = std::fs::read(support::fixture("tests/fixtures/inlines/attach-8.0.4.nettrace")).unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flame-inlines");
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.nettrace");
    std::fs::write(&plain, &real).unwrap();
    let sym0 = Symbolizer::open(&plain, Options::default()).unwrap();
    assert!(sym0.has_inline_trees());
    // Every body's every 3rd byte, leaf and caller.
    let mut addrs = Vec::new();
    for b in sym0.store().bodies() {
        if let Some(start) = b.start {
            for o in (1..b.code_size as u64).step_by(3) {
                addrs.push(start + o);
            }
        }
    }
    assert!(addrs.len() > 100);
    let stacks: Vec<Vec<u64>> = addrs.chunks(2).filter(|c| c.len() == 2).map(|c| c.to_vec()).chain([vec![0x10], vec![0x10, 0x20]]).collect();
    let refs: Vec<&[u64]> = stacks.iter().map(Vec::as_slice).collect();
    let events: Vec<(u64, u32, bool)> = (1..=refs.len() as u32).map(|i| (5, i, i % 5 != 0)).collect();
    let bytes = with_samples(&real, &refs, &events);
    let path = dir.join("with-samples.nettrace");
    std::fs::write(&path, &bytes).unwrap();
    let sym = Symbolizer::open(&path, Options::default()).unwrap();
    let (p, fault) = Profile::read(&sym, &bytes[..], false).unwrap();
    assert!(fault.is_none());
    assert_eq!(p.stats().samples, refs.len() as u64);
    let lines = collapsed(&p);
    // The expected text of one address by the brief's rule, from the symbolizer's own answer.
    let text = |addr: u64, kind: FrameKind| -> Vec<String> {
        let (f, inl) = sym.symbolize_inlined(addr, kind);
        let one = |m: Option<&str>, file: Option<&str>, line: Option<u32>| match (file, line) {
            (Some(file), Some(l)) => format!("{} ({}:{l})", m.unwrap(), file.rsplit('/').next().unwrap()),
            _ => m.unwrap().to_owned(),
        };
        let mut v = vec![match f.at.method {
            Some(m) => one(Some(m), f.at.file, f.at.line),
            None => format!("{addr:#x}"),
        }];
        v.extend(inl.iter().rev().map(|i| one(Some(i.at.method.unwrap_or("[inlined]")), i.at.file, i.at.line)));
        v
    };
    let caller = FrameKind::ReturnAddress.for_runtime(sym.runtime_major());
    let mut want: std::collections::HashMap<Vec<String>, u64> = Default::default();
    let mut some_inlined = false;
    for (i, s) in refs.iter().enumerate() {
        let managed = (i as u32 + 1) % 5 != 0;
        let mut frames = Vec::new();
        for (j, &a) in s.iter().enumerate().rev() {
            let kind = if j == 0 && managed { FrameKind::Leaf } else { caller };
            let t = text(a, kind);
            some_inlined |= t.len() > 1;
            frames.extend(t);
        }
        *want.entry(frames).or_default() += 1;
    }
    assert!(some_inlined);
    let got: std::collections::HashMap<Vec<String>, u64> = lines.into_iter().collect();
    assert_eq!(got, want);
}

#[test]
fn a_call_tree_past_its_bound_counts_every_sample_at_a_caller() {
    // 3,000 random stacks of depth 4 over 50 unknown addresses: about 9,000 distinct prefixes,
    // in a tree bounded at 2,000 nodes, merged and per thread (2 threads).
    let mut w = writer(8);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let stacks: Vec<Vec<u64>> = (0..3000).map(|_| (0..4).map(|_| 0x1000 + 16 * (next() % 50)).collect()).collect();
    let refs: Vec<&[u64]> = stacks.iter().map(Vec::as_slice).collect();
    w.stacks(1, &refs, 8).unwrap();
    // Each stack twice (the second time from the cache).
    let ev: Vec<(u32, u64, u32, u64, &[u8])> = (1..=3000u32).chain(1..=3000).map(|i| (META, u64::from(i % 2), i, 1, &[1u8, 0, 0, 0][..])).collect();
    w.events(&ev).unwrap();
    let bytes = w.finish().unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flame-bound");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bound.nettrace");
    std::fs::write(&path, &bytes).unwrap();
    let sym = Symbolizer::open(&path, Options::default()).unwrap();
    for per_thread in [false, true] {
        let (p, _) = Profile::read_bounded(&sym, &bytes[..], per_thread, 2000).unwrap();
        let st = p.stats();
        assert_eq!(st.samples, 6000, "per thread {per_thread}");
        assert!(st.folded > 1000 && st.folded < 6000, "per thread {per_thread}: {} folded", st.folded);
        // Folded samples count twice when their stack comes twice: an even number.
        assert_eq!(st.folded % 2, 0);
        let lines = collapsed(&p);
        assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), 6000);
        // Every line is a prefix of a real stack (root first), never a made-up one.
        let real: std::collections::HashSet<Vec<String>> = stacks.iter().map(|s| s.iter().rev().map(|a| format!("{a:#x}")).collect()).collect();
        for (l, _) in &lines {
            let l: Vec<String> = l.iter().filter(|f| !f.starts_with("Thread ")).cloned().collect();
            assert!(real.iter().any(|r| r.starts_with(&l)), "{l:?}");
        }
        // Unbounded, nothing folds.
        let (p, _) = Profile::read(&sym, &bytes[..], per_thread).unwrap();
        assert_eq!((p.stats().samples, p.stats().folded), (6000, 0));
    }
}
