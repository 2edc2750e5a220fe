//! ELF cores: the whole dump reader (headers, notes, memory, the runtime's descriptor, threads
//! and frames, with their inline trees) over arbitrary bytes, and `symbolize`'s answers for addresses taken from the input
//! itself. It must end, without a panic, in an error or a report.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = clrmap::dump::analyze(data, &clrmap::dump::Options { max_frames: 256, inlines: true }) {
        assert!(report.threads.iter().all(|t| t.frames.len() <= 256 * 2));
    }
    // Addresses from the input's last bytes: one answer each, in order.
    let addresses: Vec<u64> = data.rchunks_exact(8).take(4).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    if let Ok(report) = clrmap::dump::symbolize(data, &addresses, true, &clrmap::locate::SymbolPaths::default()) {
        let answered: Vec<u64> = report.threads.iter().flat_map(|t| t.frames.iter().map(|f| f.ip)).collect();
        assert_eq!(answered, addresses);
    }
});
