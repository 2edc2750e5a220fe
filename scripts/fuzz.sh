#!/usr/bin/env bash
# Build every fuzz target and run each for N seconds (default 30), then replay the regression
# corpora in fuzz/regressions/<target>/ (crashes found once, kept forever).
# Needs a nightly toolchain; without one it says so and exits 0 (stable `cargo test` still replays
# the regressions through the library's own tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-30}"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: no nightly toolchain; skipping the fuzz runs (regressions still run in cargo test)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install --locked cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
fi
cd fuzz
# fuzz/Cargo.lock is committed: resolve nothing afresh. cargo-fuzz has no --locked of its own, so
# fetch with --locked first; it fails if Cargo.toml asks for something the lock file does not hold.
cargo +nightly fetch --locked
targets=$(cargo +nightly fuzz list)
[ -n "$targets" ] || { echo "fuzz: no targets"; exit 0; }
# `cargo fuzz build` takes one target (or none, meaning all): build each by name.
for t in $targets; do
  echo "fuzz: building $t"
  cargo +nightly fuzz build -O "$t" 2>&1 | tail -n 3
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: building $t failed" >&2; exit 1; }
done
for t in $targets; do
  mkdir -p "corpus/$t"
  seeds=()
  [ -d "seeds/$t" ] && seeds+=("seeds/$t")
  [ -d "regressions/$t" ] && seeds+=("regressions/$t")
  echo "fuzz: $t for ${secs}s"
  cargo +nightly fuzz run -O "$t" "corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -n 2
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: $t failed" >&2; exit 1; }
done
