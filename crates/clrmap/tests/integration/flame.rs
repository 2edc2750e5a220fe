//! Issue 24: the sample profiler's stacks in a trace (`nettrace::read_samples`) and the flame
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
    assert_eq!(got, vec![(7, a.to_vec(), true), (8, b.to_vec(), false), (7, b.to_vec(), true)]);
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
    w.events(&[(META, 3, 1, 1, &1u32.to_le_bytes())]).unwrap();
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
    assert_eq!(got, vec![(1, vec![0x11, 0x12], true)]);
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
