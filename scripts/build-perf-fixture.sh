#!/usr/bin/env bash
# Build the Linux perf test program: tests/dotnet/perf/Hot.cs compiled by Roslyn csc 2.10
# (scripts/install-roslyn.sh) against the 3.1 framework, Release, with a portable PDB,
# deterministically (-pathmap maps the source directory to /_/src/), into tests/fixtures/perf/:
# Hot.dll, Hot.pdb and Hot.runtimeconfig.json (3.1.0 with rollForward LatestMajor, so the same
# file runs on every installed runtime; invariant globalization; tiered compilation off, so each method
# has one optimized body and ReadyToRun code stays in use).
# Options: --check  build into a temp dir and compare with the committed fixture (exit 1 if it differs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/roslyn.sh
. "$root/scripts/lib/roslyn.sh"
src="$root/tests/dotnet/perf"
out="$root/tests/fixtures/perf"
fixture_options --check "$@"
roslyn_setup
refs=()
for a in System.Private.CoreLib System.Runtime System.Console System.Runtime.Extensions; do
  refs+=("-r:$fw/$a.dll")
done

build() { # dir
  local dir="$1"
  roslyn_compile "$src" "$dir" Hot -optimize+ -debug:portable Hot.cs
}

if [ "$check" = 1 ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  build "$tmp/perf"
  if ! diff -r "$tmp/perf" "$out" >/dev/null; then
    echo "build-perf-fixture: tests/fixtures/perf differs from a fresh build" >&2
    exit 1
  fi
  echo "build-perf-fixture: byte-identical to the committed fixture"
  exit 0
fi
build "$out"
(cd "$out" && ls -l)
