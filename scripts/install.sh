#!/usr/bin/env bash
# Install clrmap: the `clrmap` binary and, beside it, the profiler library that `clrmap profile`
# loads (it looks next to its own executable first), so `profile` needs no flag.
#   bash scripts/install.sh [PREFIX]      (default: ~/.cargo; the files go to PREFIX/bin)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix="${1:-${CARGO_HOME:-$HOME/.cargo}}"
# The workspace's own target directory: the profiler's release build below shares its dependencies.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" cargo install --locked --path crates/clrmap-cli --root "$prefix"
cargo build --locked --release -p clrmap-profiler
install -m 0755 target/release/libclrmap_profiler.so "$prefix/bin/libclrmap_profiler.so"
echo "installed $prefix/bin/clrmap and $prefix/bin/libclrmap_profiler.so"
