#!/usr/bin/env bash
# The whole test suite: what `.ci/run` runs and what the README tells newcomers to run.
#   0. a fast lane: fmt, build, clippy and the tests that need nothing installed
#   1. install the real .NET runtimes and mcs (scripts/install-dotnet.sh), and Roslyn csc
#      (scripts/install-roslyn.sh); rebuild the PDB fixtures and check they equal the committed ones
#   2. build everything, clippy with -D warnings; the library alone without its default features
#   3. all tests (real-runtime tests are mandatory when CI=true)
#   4. C ABI tests (when present), fuzz targets built and run briefly when a nightly toolchain exists
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# 15 s per target keeps the whole run under an hour on 2 cores (13 targets); FUZZ_SECONDS=N for more.
FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
# Each stage's heading says how long the run has taken so far (CI has 90 minutes; we keep under 60).
START=$SECONDS
stage() { echo "== [$(( (SECONDS - START) / 60 ))m$(( (SECONDS - START) % 60 ))s] $*"; }

stage "cargo without the crates registry where it cannot be reached (vendored crates)"
if [ -f ../shared/cargo-vendor/use-if-offline.sh ]; then
  bash ../shared/cargo-vendor/use-if-offline.sh
fi
stage "fast lane: fmt, build, clippy and the tests that need no runtime or tool, before any install"
stage "cargo fmt (rustfmt.toml: long lines, as the code was written)"
cargo fmt --all -- --check

stage "build"
cargo build --workspace --all-targets --locked
# The fuzz crate keeps its own lock; a library dependency added without it fails here, not after
# half an hour of tests.
(cd fuzz && cargo metadata --locked --format-version 1 >/dev/null)

stage "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

stage "the tests that need no runtime or tool"
cargo test --workspace --locked

stage "install real runtimes (the SDK's NuGet packs, or PyPI without an SDK)"
bash scripts/install-dotnet.sh
stage "install Roslyn csc 2.10 (portable PDBs)"
bash scripts/install-roslyn.sh
stage "install win-x86 and win-x64 frameworks (ReadyToRun images of other machines)"
bash scripts/install-r2r-images.sh

stage "install Linux perf (perf tests)"
bash scripts/install-perf.sh
stage "install the service's load-test tools (wrk, nginx, curl)"
bash scripts/install-serve-tools.sh
stage "install the flame tests' independent readers (protoc, speedscope, chromium, inferno)"
bash scripts/install-flame-tools.sh
stage "install Microsoft's diagnostics tools (dotnet-trace, dotnet-stack, dotnet-dump: the oracles of ms_tools.rs)"
bash scripts/install-ms-tools.sh

stage "the committed Frames and Hot fixtures are what Roslyn builds from tests/dotnet (byte for byte)"
bash scripts/build-frame-fixtures.sh --check
bash scripts/build-perf-fixture.sh --check
if command -v dotnet >/dev/null 2>&1; then
  bash scripts/build-r2r-fixture.sh --check
else
  stage "not checked: tests/fixtures/r2r/Frames.dll needs the .NET SDK's Crossgen2 to rebuild"
fi

stage "the library without its default features (no serde_json, no capture reader)"
cargo build -p clrmap --no-default-features --locked
cargo clippy -p clrmap --no-default-features --locked -- -D warnings

stage "rustdoc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked

stage "tests that need .NET, perf, a tool or a built binary (#[ignore = \"needs .NET\"]; mandatory with CI=true)"
cargo test --workspace --locked -- --ignored

stage "C ABI tests (gcc, valgrind)"
bash scripts/c-tests.sh

stage "install as the README says, into a scratch prefix, and profile without flags"
prefix="$PWD/target/install-check"
rm -rf "$prefix"
bash scripts/install.sh "$prefix" >/dev/null
env -u CLRMAP_PROFILER_PATH "$prefix/bin/clrmap" profile -o "$prefix/frames.capture" -- \
  "$(root="$PWD"; . scripts/lib/runtimes.sh; runtime_field "$(runtime_channels | tail -n1)" dotnet)" tests/fixtures/frames/release-portable/Frames.dll >/dev/null
"$prefix/bin/clrmap" il dump "$prefix/frames.capture" --module Frames.dll | grep -q "Frames.Nested::Inner"

if [ -x scripts/fuzz.sh ]; then
  stage "fuzz (${FUZZ_SECONDS}s per target)"
  bash scripts/fuzz.sh "$FUZZ_SECONDS"
fi
stage "clean the tests' scratch (target/tmp, the fixtures they built and the runs they recorded)"
rm -rf target/tmp target/install-check target/c-tests
stage "all tests passed"
