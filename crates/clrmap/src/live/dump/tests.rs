//! The dump reader over cores built here, byte by byte: a thread list and a frame chain that
//! point back on themselves end with notes, and memory the core lacks is named.

use super::core::Core;
use super::descriptor::Descriptor;
use super::names::Names;
use super::target::{self, Target};
use super::DumpThread;

const BASE: u64 = 0x10000;

fn put(v: &mut [u8], at: usize, bytes: &[u8]) {
    v[at..at + bytes.len()].copy_from_slice(bytes);
}

/// An x86-64 core: one thread (tid 77, rip and rsp as given) and one page of memory at `BASE`,
/// of which the file holds `held` bytes.
fn core_bytes(memory: &[u8], rip: u64, rsp: u64, held: usize) -> Vec<u8> {
    let mut desc = vec![0u8; 336];
    put(&mut desc, 32, &77u32.to_le_bytes());
    put(&mut desc, 112 + 16 * 8, &rip.to_le_bytes());
    put(&mut desc, 112 + 19 * 8, &rsp.to_le_bytes());
    let mut note = Vec::new();
    note.extend_from_slice(&5u32.to_le_bytes());
    note.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    note.extend_from_slice(&1u32.to_le_bytes());
    note.extend_from_slice(b"CORE\0\0\0\0");
    note.extend_from_slice(&desc);
    let note_at = 64 + 2 * 56;
    let mem_at = note_at + note.len();
    let mut f = vec![0u8; mem_at];
    put(&mut f, 0, b"\x7fELF\x02\x01\x01");
    put(&mut f, 16, &4u16.to_le_bytes());
    put(&mut f, 18, &62u16.to_le_bytes());
    put(&mut f, 20, &1u32.to_le_bytes());
    put(&mut f, 32, &64u64.to_le_bytes());
    put(&mut f, 52, &64u16.to_le_bytes());
    put(&mut f, 54, &56u16.to_le_bytes());
    put(&mut f, 56, &2u16.to_le_bytes());
    // PT_NOTE
    put(&mut f, 64, &4u32.to_le_bytes());
    put(&mut f, 64 + 8, &(note_at as u64).to_le_bytes());
    put(&mut f, 64 + 32, &(note.len() as u64).to_le_bytes());
    put(&mut f, 64 + 40, &(note.len() as u64).to_le_bytes());
    put(&mut f, 64 + 48, &4u64.to_le_bytes());
    // PT_LOAD
    let ph = 64 + 56;
    put(&mut f, ph, &1u32.to_le_bytes());
    put(&mut f, ph + 8, &(mem_at as u64).to_le_bytes());
    put(&mut f, ph + 16, &BASE.to_le_bytes());
    put(&mut f, ph + 32, &(memory.len() as u64).to_le_bytes());
    put(&mut f, ph + 40, &(memory.len() as u64).to_le_bytes());
    put(&mut f, note_at, &note);
    f.extend_from_slice(&memory[..held.min(memory.len())]);
    f
}

fn descriptor() -> Descriptor {
    let json = br#"{"version":0,"types":{
        "Thread":{"Id":0,"OSId":8,"LinkNext":16,"Frame":24,"ExceptionTracker":32,"LastThrownObject":40},
        "ThreadStore":{"FirstThreadLink":0},"Frame":{"Next":8},"RangeSectionMap":{"TopLevelData":0}},
        "globals":{"ThreadStore":[[0],"pointer"],"ExecutionManagerCodeRangeMapAddress":[[1],"pointer"]},
        "contracts":{"Thread":1,"StackWalk":1,"ExecutionManager":2}}"#;
    Descriptor::parse_json(json, &[BASE, BASE + 0x800]).unwrap()
}

/// A thread store whose one thread links to itself, and whose frame chain points to itself.
fn looping_memory() -> Vec<u8> {
    let mut m = vec![0u8; 0x1000];
    put(&mut m, 0, &(BASE + 0x100).to_le_bytes()); // the ThreadStore global's pointer
    put(&mut m, 0x100, &(BASE + 0x210).to_le_bytes()); // FirstThreadLink
    put(&mut m, 0x200, &1u32.to_le_bytes()); // Id
    put(&mut m, 0x208, &77u64.to_le_bytes()); // OSId
    put(&mut m, 0x210, &(BASE + 0x210).to_le_bytes()); // LinkNext: itself
    put(&mut m, 0x218, &(BASE + 0x400).to_le_bytes()); // Frame
    put(&mut m, 0x400, &0x99u64.to_le_bytes()); // an unknown frame kind
    put(&mut m, 0x408, &(BASE + 0x400).to_le_bytes()); // Next: itself
    m
}

#[test]
fn loops_end_with_notes() {
    let bytes = core_bytes(&looping_memory(), 0x5000, BASE + 0xF00, 0x1000);
    let core = Core::parse(&bytes).unwrap();
    assert_eq!(core.threads().len(), 1);
    assert_eq!(core.threads()[0].tid, 77);
    let d = descriptor();
    let t = Target { core: &core, d: &d };
    let mut notes = Vec::new();
    let threads = target::threads(t, &mut notes).unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].os_id, 77);
    assert!(notes.iter().any(|n| n.contains("loops")), "{notes:?}");
    let mut out = DumpThread::default();
    super::walk::walk(t, &threads[0], &core.threads()[0].regs, 1000, &mut Names::default(), Some(&mut super::native::Natives::new(&core)), &mut out);
    // Where the thread stopped (in no module, so a native frame with none), and the chain's one
    // frame before it loops, in their order on the stack.
    assert_eq!(out.frames.len(), 2, "{:?}", out.frames);
    assert!(out.frames.iter().any(|f| f.kind == "native" && f.module.is_none()), "{:?}", out.frames);
    assert!(out.frames.windows(2).all(|w| w[0].sp <= w[1].sp), "{:?}", out.frames);
    assert!(out.notes.iter().any(|n| n.contains("loops")), "{:?}", out.notes);
}

#[test]
fn missing_memory_is_named() {
    let bytes = core_bytes(&looping_memory(), 0x5000, BASE + 0xF00, 0x300);
    let core = Core::parse(&bytes).unwrap();
    assert!(core.notes().iter().any(|n| n.contains("truncated")), "{:?}", core.notes());
    assert_eq!(core.u64(BASE + 0x208).unwrap(), 77);
    assert!(core.u64(BASE + 0x400).is_err());
    assert!(core.u64(0xDEAD_0000).is_err());
    let missing = core.missing();
    assert!(missing.contains(&(BASE + 0x400, BASE + 0x408)), "{missing:x?}");
    // A walk over the truncated frame chain ends with a note.
    let d = descriptor();
    let t = Target { core: &core, d: &d };
    let threads = target::threads(t, &mut Vec::new()).unwrap();
    let mut out = DumpThread::default();
    super::walk::walk(t, &threads[0], &core.threads()[0].regs, 1000, &mut Names::default(), Some(&mut super::native::Natives::new(&core)), &mut out);
    assert!(out.notes.iter().any(|n| n.contains("cannot be read")), "{:?}", out.notes);
}

#[test]
fn every_prefix_of_a_core_ends() {
    let bytes = core_bytes(&looping_memory(), 0x5000, BASE + 0xF00, 0x1000);
    for n in 0..bytes.len() {
        let _ = super::analyze(&bytes[..n], &super::Options::default());
    }
    let r = super::analyze(&bytes, &super::Options::default()).unwrap();
    assert_eq!(r.threads.len(), 1);
    assert!(r.notes.iter().any(|n| n.contains("no libcoreclr.so")), "{:?}", r.notes);
}
