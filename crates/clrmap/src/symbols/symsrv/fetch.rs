//! One download: `GET <server>/<key>` into a temporary file beside the cache entry, bounded in
//! size and time, renamed over the entry only when whole and checked.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use super::{Check, Config, Key};
use crate::base::fs::NewFile;

/// Why a server gave no file.
#[derive(Debug)]
pub(super) enum Failure {
    /// 404 (or 410): the server has no such file.
    NotFound,
    /// The server could not be reached or did not answer in time: not asked again this run.
    Unreachable(String),
    /// An answer that is not the file: another status, a truncated or oversized body, a file
    /// that fails its check, or a cache that cannot be written.
    Bad(String),
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Failure::NotFound => f.write_str("not on the server (404)"),
            Failure::Unreachable(why) => write!(f, "unreachable: {why}; not asked again in this run"),
            Failure::Bad(why) => f.write_str(why),
        }
    }
}

/// The URL of `key` on `server` (a base URL, with or without a trailing `/`).
fn url(server: &str, key: &Key) -> String {
    format!("{}/{}", server.trim_end_matches('/'), key.as_str())
}

pub(super) fn download(server: &str, key: &Key, headers: &[(&str, String)], entry: &Path, config: &Config, check: Check<'_>) -> Result<(), Failure> {
    let started = Instant::now();
    // Redirects are followed here, not by the HTTP client: only to http(s) URLs with a host, at
    // most MAX_REDIRECTS times, each within the same time bound.
    let agent = ureq::AgentBuilder::new().timeout(config.timeout).timeout_connect(config.timeout).redirects(0).user_agent(concat!("clrmap/", env!("CARGO_PKG_VERSION"))).build();
    let mut at = url(server, key);
    let mut hops = 0usize;
    let response = loop {
        let left = config.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(Failure::Unreachable(format!("no answer within {:?}", config.timeout)));
        }
        let mut request = agent.get(&at).timeout(left);
        for (name, value) in headers {
            request = request.set(name, value);
        }
        let response = match request.call() {
            Ok(r) => r,
            Err(ureq::Error::Status(404 | 410, _)) => return Err(Failure::NotFound),
            Err(ureq::Error::Status(code, r)) => return Err(Failure::Bad(format!("HTTP {code} {}", r.status_text()))),
            Err(ureq::Error::Transport(t)) => return Err(Failure::Unreachable(transport(&t, started, config))),
        };
        if !matches!(response.status(), 301 | 302 | 303 | 307 | 308) {
            break response;
        }
        hops = hops.saturating_add(1);
        if hops > super::MAX_REDIRECTS {
            return Err(Failure::Bad(format!("more than {} redirects; nothing fetched", super::MAX_REDIRECTS)));
        }
        let location = response.header("Location").unwrap_or("");
        at = redirect_target(&at, location).map_err(|why| Failure::Bad(format!("HTTP {} to {}: {why}; not followed", response.status(), shorten(location))))?;
    };
    if !(200..300).contains(&response.status()) {
        return Err(Failure::Bad(format!("HTTP {} {}", response.status(), response.status_text())));
    }
    // A declared length over the bound is refused before a byte is read.
    if let Some(len) = response.header("Content-Length").and_then(|l| l.trim().parse::<u64>().ok()) {
        if len > config.max_bytes && response.header("Content-Encoding").is_none() {
            return Err(Failure::Bad(format!("the file is {len} bytes, over the {} allowed; nothing fetched", config.max_bytes)));
        }
    }
    if let Some(parent) = entry.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Failure::Bad(format!("cannot create the cache directory {}: {e}", parent.display())))?;
    }
    let mut out = NewFile::create(entry).map_err(|e| Failure::Bad(format!("cannot write the cache entry {}: {e}", entry.display())))?;
    // One byte past the bound tells an oversized body from one exactly at it.
    let mut body = response.into_reader().take(config.max_bytes.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut || e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Failure::Unreachable(format!("no whole answer within {:?}", config.timeout)));
            }
            Err(e) => return Err(Failure::Bad(format!("the body was cut ({e}); nothing cached"))),
        };
        // The first bytes must be the kind's magic: a 4 GiB body of junk stops at its start.
        let head = usize::try_from(total).unwrap_or(usize::MAX);
        let magic = key.magic();
        if head < magic.len() {
            let got = buf.get(..n).unwrap_or(&[]);
            let want = magic.get(head..).unwrap_or(&[]);
            let len = got.len().min(want.len());
            if got.get(..len) != want.get(..len) {
                if head == 0 && crate::formats::pdb::is_windows_pdb(got) {
                    return Err(Failure::Bad(format!("{}: the server sent a Windows (MSF) PDB; nothing cached", crate::formats::pdb::WINDOWS_PDB_MESSAGE)));
                }
                return Err(Failure::Bad("the body does not start as the file the key names does; nothing cached".to_owned()));
            }
        }
        total = total.saturating_add(n as u64);
        if total > config.max_bytes {
            return Err(Failure::Bad(format!("the body is over {} bytes; nothing cached", config.max_bytes)));
        }
        out.file().write_all(buf.get(..n).unwrap_or(&[])).map_err(|e| Failure::Bad(format!("cannot write the cache entry {}: {e}", entry.display())))?;
        if started.elapsed() > config.timeout {
            return Err(Failure::Unreachable(format!("no whole answer within {:?}", config.timeout)));
        }
    }
    out.file().flush().map_err(|e| Failure::Bad(format!("cannot write the cache entry {}: {e}", entry.display())))?;
    // Checked in its temporary file, before anyone can see it under the key.
    if !check(out.temp_path()) {
        return Err(Failure::Bad(format!("the file sent ({total} bytes) is not the one the key names; nothing cached")));
    }
    out.commit().map_err(|e| Failure::Bad(format!("cannot write the cache entry {}: {e}", entry.display())))
}

/// Where a redirect from `from` to `location` leads: an http or https URL with a host, or why not.
fn redirect_target(from: &str, location: &str) -> Result<String, &'static str> {
    if location.trim().is_empty() {
        return Err("no Location");
    }
    let base = url::Url::parse(from).map_err(|_| "the URL redirected from does not parse")?;
    let to = base.join(location.trim()).map_err(|_| "the Location is not a URL")?;
    if !matches!(to.scheme(), "http" | "https") {
        return Err("only http and https URLs are followed");
    }
    if to.host_str().is_none_or(str::is_empty) {
        return Err("the URL names no host");
    }
    Ok(to.into())
}

/// At most 200 characters of `text` (a server's Location header, in a note).
fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(200).collect();
    if s.len() < text.len() {
        s.push_str("...");
    }
    format!("{s:?}")
}

/// What a transport error says, in a few words.
fn transport(t: &ureq::Transport, started: Instant, config: &Config) -> String {
    if started.elapsed() >= config.timeout {
        return format!("no answer within {:?}", config.timeout);
    }
    match t.kind() {
        ureq::ErrorKind::Dns => "the host name does not resolve".to_owned(),
        ureq::ErrorKind::ConnectionFailed => "the connection was refused or failed".to_owned(),
        _ => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redirect_target;

    #[test]
    fn redirects_go_only_to_http_urls_with_a_host() {
        let from = "http://127.0.0.1:9/a/b.pdb";
        assert_eq!(redirect_target(from, "/c/d.pdb").as_deref(), Ok("http://127.0.0.1:9/c/d.pdb"));
        assert_eq!(redirect_target(from, "https://example.invalid/x").as_deref(), Ok("https://example.invalid/x"));
        for bad in ["file:///etc/passwd", "data:text/plain,hi", "unix:/run/x.sock", "mailto:a@b", "about:blank", "ftp://h/x", ""] {
            assert!(redirect_target(from, bad).is_err(), "{bad}");
        }
    }
}
