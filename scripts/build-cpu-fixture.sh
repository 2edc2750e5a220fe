#!/usr/bin/env bash
# Build the CPU-profile test program (crates/clrmap-cli/tests/cli/cpu.rs): tests/dotnet/cpu/Cpu.cs
# compiled by Roslyn csc (scripts/install-roslyn.sh) against the 3.1 framework, Release, with a
# portable PDB, deterministically (-pathmap maps the source directory to /_/src/), into
# tests/fixtures/cpu/: Cpu.dll, Cpu.pdb and Cpu.runtimeconfig.json (3.1.0 with rollForward
# LatestMajor, so the same file runs on every installed runtime; invariant globalization; tiered
# compilation off, so each method has one optimized body and ReadyToRun code stays in use).
# Options: --check  build into a temp dir and compare with the committed fixture (exit 1 if it differs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/roslyn.sh
. "$root/scripts/lib/roslyn.sh"
src="$root/tests/dotnet/cpu"
out="$root/tests/fixtures/cpu"
fixture_options --check "$@"
roslyn_setup
refs=()
for a in System.Private.CoreLib System.Runtime System.Console System.Runtime.Extensions; do
  refs+=("-r:$fw/$a.dll")
done

build() { # dir
  local dir="$1"
  roslyn_compile "$src" "$dir" Cpu -optimize+ -debug:portable Cpu.cs
}

if [ "$check" = 1 ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  build "$tmp/cpu"
  if ! diff -r "$tmp/cpu" "$out" >/dev/null; then
    echo "build-cpu-fixture: tests/fixtures/cpu differs from a fresh build" >&2
    exit 1
  fi
  echo "build-cpu-fixture: byte-identical to the committed fixture"
  exit 0
fi
build "$out"
(cd "$out" && ls -l)
