//! `flame` on a large synthetic trace (issue 24): filled in below.
fn main() {}
