#!/usr/bin/env bash
# Build every fuzz target and run each for N seconds (default 30), then replay the regression
# corpora in fuzz/regressions/<target>/ (crashes found once, kept forever).
# Needs a nightly toolchain. Without one it says so loudly on stderr; with CI=true that fails the
# run (a fuzz stage that did not fuzz must never pass silently); elsewhere it exits 0 (stable
# `cargo test` still replays the regressions through the library's own tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-30}"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "************************************************************************" >&2
  echo "fuzz: NOT RUN: no nightly toolchain (rustup toolchain install nightly)." >&2
  echo "fuzz: only the regression corpora ran, through cargo test." >&2
  echo "************************************************************************" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
cd fuzz
# fuzz/Cargo.lock is committed: resolve nothing afresh.
cargo +nightly fetch --locked
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^clrmap-fuzz$' || true)
[ -n "$targets" ] || { echo "fuzz: no targets" >&2; exit 1; }
# cargo-fuzz where it is installed or can be; otherwise (no crates registry: it is not among the
# vendored crates) the same build by hand: libFuzzer's coverage instrumentation (the flags
# cargo-fuzz passes), --cfg fuzzing, debug assertions, a release build of every target.
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install --locked cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz >/dev/null 2>&1 || true
fi
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: with cargo-fuzz"
  for t in $targets; do
    echo "fuzz: building $t"
    cargo +nightly fuzz build -O "$t" 2>&1 | tail -n 3
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: building $t failed" >&2; exit 1; }
  done
  run() { cargo +nightly fuzz run -O "$1" "${@:2}"; }
else
  echo "fuzz: cargo-fuzz is not installed and cannot be (no crates registry): building the targets with its flags by hand"
  host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
  RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    cargo +nightly build --locked --release --target "$host" --bins 2>&1 | tail -n 3
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: building the targets failed" >&2; exit 1; }
  run() { local t="$1"; shift; "target/$host/release/$t" "$@"; }
fi
for t in $targets; do
  mkdir -p "corpus/$t"
  seeds=()
  [ -d "seeds/$t" ] && seeds+=("seeds/$t")
  [ -d "regressions/$t" ] && seeds+=("regressions/$t")
  echo "fuzz: $t for ${secs}s"
  if cargo +nightly fuzz --version >/dev/null 2>&1; then
    run "$t" "corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -n 2
  else
    run "$t" "corpus/$t" "${seeds[@]}" -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -n 2
  fi
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: $t failed" >&2; exit 1; }
done
