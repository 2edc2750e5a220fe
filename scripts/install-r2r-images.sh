#!/usr/bin/env bash
# Install the Windows ReadyToRun framework images the R2R machine-layout tests read
# (crates/clrmap/tests/integration/r2r.rs). No runtime for these platforms runs here: the tests
# check the images structurally.
# With the .NET SDK (scripts/install-dotnet.sh's route): the NuGet runtime packs
#   - 10.0.12 win-x86 and win-x64 (Microsoft.NETCore.App.Runtime.win-*; the one version NuGet's copy
#     serves for both)  -> ${CLRMAP_DOTNET_HOME:-.dotnet}/win/{x86,x64}/10.0.12/*.dll
# Without it, from PyPI:
#   - 3.1.23 win-x86 framework (PE Machine 0x14C)  from PyPI `dotnetcore2==3.1.23` (win32 wheel)
#       -> ${CLRMAP_DOTNET_HOME:-.dotnet}/win/x86/3.1.23/*.dll
#   - 3.1.23 win-x64 framework (PE Machine 0x8664) from PyPI `dotnetcore2==3.1.23` (win_amd64 wheel)
#       -> ${CLRMAP_DOTNET_HOME:-.dotnet}/win/x64/3.1.23/*.dll
# Pinned: the version and each wheel's SHA-256. Idempotent: a complete install (its .complete
# marker) is kept; an incomplete one is redone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${CLRMAP_DOTNET_HOME:-$root/.dotnet}/win"
version="3.1.23"

install_one() { # arch platform sha256
  local arch="$1" platform="$2" sha="$3"
  local out="$dest/$arch/$version"
  if [ -f "$out/.complete" ]; then
    return 0
  fi
  rm -rf "$out"
  mkdir -p "$out"
  local tmp
  tmp="$(mktemp -d)"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --platform "$platform" --only-binary=:all: -d "$tmp" "dotnetcore2==$version"
  local wheel="$tmp/dotnetcore2-$version-py3-none-$platform.whl"
  echo "$sha  $wheel" | sha256sum --check --quiet
  python3 - "$wheel" "$out" "dotnetcore2/bin/shared/Microsoft.NETCore.App/$version/" <<'EOF'
import os, sys, zipfile
wheel, out, prefix = sys.argv[1:]
n = 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and name.endswith(".dll") and "/" not in name[len(prefix):]:
            with open(os.path.join(out, name[len(prefix):]), "wb") as f:
                f.write(z.read(name))
            n += 1
if n < 100:
    sys.exit(f"install-r2r-images: only {n} assemblies in {wheel}")
EOF
  rm -rf "$tmp"
  touch "$out/.complete"
}

if [ -f "${CLRMAP_DOTNET_HOME:-$root/.dotnet}/.route-sdk" ] || { [ "${CLRMAP_DOTNET_ROUTE:-}" != pypi ] && command -v dotnet >/dev/null 2>&1; }; then
  version=10.0.12
  for arch in x86 x64; do
    out="$dest/$arch/$version"
    [ -f "$out/.complete" ] && continue
    work="$(mktemp -d)"
    cat >"$work/win.csproj" <<XML
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net10.0</TargetFramework></PropertyGroup>
  <ItemGroup><PackageDownload Include="Microsoft.NETCore.App.Runtime.win-$arch" Version="[$version]" /></ItemGroup>
</Project>
XML
    (cd "$work" && dotnet restore --nologo -v q >"$work/log" 2>&1) || { cat "$work/log" >&2; exit 1; }
    packs="$(dotnet nuget locals global-packages --list | sed -n 's/^global-packages: //p' | sed 's:/*$::')"
    lib="$packs/microsoft.netcore.app.runtime.win-$arch/$version/runtimes/win-$arch/lib/net10.0"
    rm -rf "$out"
    mkdir -p "$out"
    cp -p "$lib"/*.dll "$out/"
    n="$(ls "$out" | wc -l)"
    [ "$n" -ge 100 ] || { echo "install-r2r-images: only $n assemblies in $lib" >&2; exit 1; }
    touch "$out/.complete"
    rm -rf "$work"
  done
  echo "win-x86 $version framework: $dest/x86/$version"
  echo "win-x64 $version framework: $dest/x64/$version"
  exit 0
fi

install_one x86 win32 bfa7f4c1301bb8e6efaa231a9de9f427b8556947d6c9875cbfc6add5777edacc
install_one x64 win_amd64 e2528813677d7a080522336cb530442408d1e2aea76fa8657018fb532c03c252
echo "win-x86 $version framework: $dest/x86/$version"
echo "win-x64 $version framework: $dest/x64/$version"
