//! Large requests: a frame list long enough to hold a worker for a while (an OpenTelemetry
//! profiler's batch of a thousand frames) is cut into runs written on several threads at once,
//! then joined in request order, so one big request does not set the service's tail latency.

use std::sync::atomic::AtomicUsize;
use std::sync::OnceLock;

use super::answer::{Ask, Found, Stop};

/// Lists shorter than this are written on the request's own thread: starting a thread costs
/// about as much as answering a hundred frames.
pub const PARALLEL_MIN: usize = 256;

/// At most this many threads for one list.
pub const MAX_THREADS: usize = 8;

/// How many runs to cut a list of `frames` into (1: write it in place).
pub(super) fn parts(frames: usize) -> usize {
    if frames < PARALLEL_MIN {
        return 1;
    }
    // Asked once: the answer reads the cgroup's files.
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    cores.min(MAX_THREADS).min(frames / (PARALLEL_MIN / 2)).max(1)
}

/// Write `asks` as `parts` runs at once (the first on this thread), each run's frames
/// comma-separated and every run after the first starting with a comma, so the runs in order are
/// the list. The runs together hold at most `max` bytes (past it: [`Stop::TooLarge`]); the
/// caller then copies them into the bounded answer in order.
pub(super) fn write_runs(found: &Found<'_>, asks: &[(usize, Ask)], parts: usize, max: usize) -> Result<Vec<Vec<u8>>, Stop> {
    let size = asks.len().div_ceil(parts.max(1)).max(1);
    let left = AtomicUsize::new(max);
    let mut chunks = asks.chunks(size);
    let first = chunks.next().unwrap_or(&[]);
    let (head, rest) = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .map(|chunk| {
                let left = &left;
                scope.spawn(move || {
                    let mut run = Vec::with_capacity(chunk.len().saturating_mul(160));
                    let ok = found.write_run(chunk, false, &mut run, left);
                    ok.then_some(run)
                })
            })
            .collect();
        let mut head = Vec::with_capacity(first.len().saturating_mul(160));
        let ok = found.write_run(first, true, &mut head, &left);
        // A thread that panicked (it cannot: no code on this path panics) answers as if too large.
        let rest: Vec<Option<Vec<u8>>> = handles.into_iter().map(|h| h.join().ok().flatten()).collect();
        (ok.then_some(head), rest)
    });
    let mut runs = Vec::with_capacity(parts);
    runs.push(head.ok_or(Stop::TooLarge)?);
    for run in rest {
        runs.push(run.ok_or(Stop::TooLarge)?);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::ident::Ident;
    use super::super::lru::Slot;
    use super::*;

    #[test]
    fn runs_written_at_once_join_into_the_list_in_request_order() {
        let idents = [Ident { name: Some("A.dll".into()), ..Ident::default() }];
        let pdbs = [Some(Slot::Missing(Arc::from("not here")))];
        let found = Found { idents: &idents, pdbs: &pdbs, images: &[None], context: 0 };
        let asks: Vec<(usize, Ask)> = (0..1000u32).map(|i| (0, Ask::Il { token: 0x0600_0000 + i, il: i })).collect();
        let mut serial = Vec::new();
        assert!(found.write_run(&asks, true, &mut serial, &AtomicUsize::new(usize::MAX)));
        for parts in [2, 3, 7] {
            let runs = write_runs(&found, &asks, parts, usize::MAX).unwrap();
            assert_eq!(runs.len(), parts);
            assert_eq!(runs.concat(), serial, "{parts} runs");
        }
        let v: serde_json::Value = serde_json::from_slice(&[b"[".as_slice(), &serial, b"]"].concat()).unwrap();
        assert_eq!(v[999]["token"], 0x0600_0000 + 999);
        assert_eq!(v[5]["error"]["kind"], "not_found");
        // The runs share one bound.
        assert_eq!(write_runs(&found, &asks, 3, serial.len() / 2), Err(Stop::TooLarge));
        assert!(parts(PARALLEL_MIN - 1) == 1 && parts(100_000) <= MAX_THREADS);
    }
}
