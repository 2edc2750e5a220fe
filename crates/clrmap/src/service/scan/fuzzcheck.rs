//! The `service_request` fuzz target's check, in the library so that the stable tests run the
//! same code: wherever the cursor reads a body, serde's model reads the same request, and its
//! frames ask what the cursor's asks are.
//!
//! Not part of the API: it panics when the two readers differ, which is what a fuzzer needs.
#![allow(clippy::panic)]

use crate::service::decode::{ask_of, At};
use crate::service::request::{with_frame_budget, Request};

/// Read `body` with both readers (at most `max_frames` frames) and panic where the cursor's
/// request is not serde's, or where it reads a body that is not UTF-8. Whether the cursor read
/// it.
pub fn check(body: &[u8], max_frames: usize) -> bool {
    let asked = super::read_asked(body, max_frames);
    let Ok(body) = std::str::from_utf8(body) else {
        assert!(asked.is_none(), "asks read from a body that is not UTF-8: {body:?}");
        return false;
    };
    let Some(fast) = super::read(body, max_frames) else {
        assert!(asked.is_none(), "asks read from a body the cursor does not read: {body:?}");
        return false;
    };
    let slow = match with_frame_budget(max_frames, || serde_json::from_str::<Request>(body)) {
        Ok(slow) if slow == fast => slow,
        Ok(slow) => panic!("the cursor read {fast:?}, serde {slow:?}, from {body:?}"),
        Err(e) => panic!("the cursor read {fast:?}, serde refused ({e}), from {body:?}"),
    };
    if let Some(asked) = asked {
        // The service's own reading of serde's request (Service::read_with_serde).
        let context_lines = slow.context_lines;
        let (modules, lists) = slow.chosen();
        let Some((groups, nested)) = lists else { panic!("asks read from a body with no frames: {body:?}") };
        let asks: Vec<Vec<_>> = groups
            .iter()
            .enumerate()
            .map(|(g, frames)| {
                frames
                    .iter()
                    .enumerate()
                    .map(|(i, f)| ask_of(f, At { group: g, index: i, nested }, modules.len()).unwrap_or_else(|e| panic!("the cursor asked where serde's frame is {e:?}: {body:?}")))
                    .collect()
            })
            .collect();
        assert_eq!((asked.modules, asked.groups, asked.nested, asked.context_lines), (modules, asks, nested, context_lines), "{body:?}");
    }
    true
}
