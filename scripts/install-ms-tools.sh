#!/usr/bin/env bash
# Microsoft's diagnostics tools, the oracles and inputs of the tests that check clrmap against them
# (crates/clrmap-cli/tests/cli/ms_tools.rs; issue 31): dotnet-trace (records and converts traces),
# dotnet-stack (prints a running process's stacks) and dotnet-dump (crash dumps), from NuGet as .NET
# tools, into .dotnet/tools (`dotnet tool install --tool-path`), each at the version pinned below.
# Needs the .NET SDK (`dotnet` on PATH); without it, says so and does nothing (the tests that use the
# tools are then not run: they need the SDK too). Idempotent: a tool already at its version is kept.
# Usage: scripts/install-ms-tools.sh [--print-dir]   (--print-dir: print the tools' directory only)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${CLRMAP_DOTNET_HOME:-$root/.dotnet}/tools"
if [ "${1:-}" = "--print-dir" ]; then
  echo "$dir"
  exit 0
fi

# The versions NuGet serves here (the same release of the three: 10.0.750501).
TOOLS=(
  "dotnet-trace 10.0.750501"
  "dotnet-stack 10.0.750501"
  "dotnet-dump 10.0.750501"
)

if ! command -v dotnet >/dev/null 2>&1; then
  echo "install-ms-tools: no .NET SDK (dotnet) on PATH: Microsoft's tools not installed" >&2
  exit 0
fi
mkdir -p "$dir"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

# The version of a tool installed in $dir, from `dotnet tool list` (empty when absent).
installed() { # NAME
  dotnet tool list --tool-path "$dir" 2>/dev/null | awk -v n="$1" 'tolower($1) == n { print $2 }'
}

for t in "${TOOLS[@]}"; do
  read -r name version <<<"$t"
  have="$(installed "$name")"
  if [ "$have" = "$version" ] && [ -x "$dir/$name" ]; then
    continue
  fi
  if [ -n "$have" ]; then
    echo "ms tools: $name $have -> $version"
    dotnet tool uninstall --tool-path "$dir" "$name" >/dev/null
  else
    echo "ms tools: $name $version"
  fi
  # Two installs of one tool at once (two work trees sharing .dotnet) race on the store: the
  # second may fail while the first succeeds; retry once, then check.
  if ! dotnet tool install --tool-path "$dir" --version "$version" "$name" >/dev/null; then
    sleep 2
    [ "$(installed "$name")" = "$version" ] || dotnet tool install --tool-path "$dir" --version "$version" "$name" >/dev/null
  fi
  [ -x "$dir/$name" ] || { echo "install-ms-tools: $dir/$name is missing after the install" >&2; exit 1; }
done
