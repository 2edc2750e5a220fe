#!/usr/bin/env bash
# Build the ReadyToRun fixture: tests/fixtures/frames/release-portable/Frames.dll compiled ahead of
# time by Crossgen2 10.0.12 (NuGet's Microsoft.NETCore.App.Crossgen2.linux-x64, the version of the
# SDK's own 10.0 runtime pack) for linux-x64, optimized, against the installed 10.0 framework, into
# tests/fixtures/r2r/Frames.dll. Its CodeView entry is the IL assembly's, so its PDB is
# tests/fixtures/frames/release-portable/Frames.pdb. A real .NET 10 ReadyToRun image of our own
# program, small and stable: the CLI's examples and tests read fixed RVAs in it, whatever runtimes
# a machine has. Crossgen2's output is deterministic (checked: two builds are byte-identical).
# Needs the .NET SDK (NuGet). Options: --check  build into a temp dir and compare (exit 1 if it differs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/runtimes.sh
. "$root/scripts/lib/runtimes.sh"
version=10.0.12
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
out="$root/tests/fixtures/r2r"

packs="$(dotnet nuget locals global-packages --list | sed -n 's/^global-packages: //p' | sed 's:/*$::')"
crossgen="$packs/microsoft.netcore.app.crossgen2.linux-x64/$version/tools/crossgen2"
if [ ! -x "$crossgen" ]; then
  work="$(mktemp -d)"
  cat >"$work/cg.csproj" <<XML
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net10.0</TargetFramework></PropertyGroup>
  <ItemGroup><PackageDownload Include="Microsoft.NETCore.App.Crossgen2.linux-x64" Version="[$version]" /></ItemGroup>
</Project>
XML
  (cd "$work" && dotnet restore --nologo -v q >"$work/log" 2>&1) || { cat "$work/log" >&2; exit 1; }
  rm -rf "$work"
fi
fw="$(runtime_field 10.0 framework)"
[ "$(basename "$fw")" = "$version" ] || { echo "build-r2r-fixture: the fixture is built against the $version framework; installed: $fw" >&2; exit 1; }

build() { # dir
  mkdir -p "$1"
  "$crossgen" "$root/tests/fixtures/frames/release-portable/Frames.dll" -r "$fw/*.dll" \
    --targetos linux --targetarch x64 -O -o "$1/Frames.dll" >/dev/null
}

if [ "$check" = 1 ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  build "$tmp"
  cmp -s "$tmp/Frames.dll" "$out/Frames.dll" || { echo "build-r2r-fixture: tests/fixtures/r2r/Frames.dll differs from a fresh build" >&2; exit 1; }
  echo "build-r2r-fixture: byte-identical to the committed fixture"
  exit 0
fi
build "$out"
ls -l "$out"
