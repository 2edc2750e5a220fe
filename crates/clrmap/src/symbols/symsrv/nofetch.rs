//! Built without the `symbol-server` feature: no server is ever asked (the cache still serves).

use std::path::Path;

use super::{Check, Config, Key};

/// Why a server gave no file.
#[derive(Debug)]
pub(super) enum Failure {
    /// Never built: the variants match the real fetcher's.
    #[allow(dead_code)]
    NotFound,
    /// Every server, in a build that cannot speak HTTP.
    Unreachable(String),
    #[allow(dead_code)]
    Bad(String),
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Failure::NotFound => f.write_str("not on the server (404)"),
            Failure::Unreachable(why) | Failure::Bad(why) => f.write_str(why),
        }
    }
}

pub(super) fn download(_: &str, _: &Key, _: &[(&str, String)], _: &Path, _: &Config, _: Check<'_>) -> Result<(), Failure> {
    Err(Failure::Unreachable("clrmap was built without the symbol-server feature".to_owned()))
}
