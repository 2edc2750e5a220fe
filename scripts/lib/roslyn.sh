# Shared by the fixture builders (build-frame-fixtures.sh, build-perf-fixture.sh): find the
# runtimes and csc, compile C# with Roslyn csc deterministically, and write the runtimeconfig every
# fixture uses. Sourced, not run, after the script has set $root (the repository).

home="${CLRMAP_DOTNET_HOME:-$root/.dotnet}"

# fixture_options ALLOWED "$@"
#   Read the builder's options: --check sets check=1, --run sets run=1, each only when ALLOWED
#   (a space-separated list) names it; anything else is a usage error (exit 2).
fixture_options() {
  local allowed="$1" a
  shift
  check=0
  run=0
  for a in "$@"; do
    case " $allowed " in
      *" $a "*) ;;
      *) echo "usage: $0 [${allowed// /] [}]" >&2; exit 2 ;;
    esac
    case "$a" in
      --check) check=1 ;;
      --run) run=1 ;;
    esac
  done
}

# roslyn_setup
#   Install the runtimes (scripts/install-dotnet.sh) when they are missing; then set csc (Roslyn,
#   scripts/install-roslyn.sh, which runs on .NET 8) and fw (the 3.1 framework directory, which the
#   fixtures reference: 3.1.3 from NuGet or 3.1.23 from PyPI; their reference assemblies carry the
#   same assembly versions, so the fixtures are byte-identical either way).
# shellcheck source=runtimes.sh
. "$root/scripts/lib/runtimes.sh"
roslyn_setup() {
  fw="$(runtime_field 3.1 framework)"
  csc="$(bash "$root/scripts/install-roslyn.sh" | sed -n 's/^csc: //p')"
}

# roslyn_compile below needs $csc (roslyn_setup) and the array refs (the 3.1 framework
# references).

# roslyn_compile SRC_DIR OUT_DIR NAME OPTIMIZE DEBUG SOURCE...
#   OUT_DIR/NAME.dll (+ NAME.pdb for -debug:portable) and OUT_DIR/NAME.runtimeconfig.json.
#   Run from the source dir with relative file names; -pathmap makes the PDB's paths /_/src/<name>
#   and its own path /_/NAME.pdb, so the output is byte-identical wherever it is built.
roslyn_compile() {
  local src="$1" dir="$2" name="$3" opt="$4" debug="$5"
  shift 5
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$src" && "$csc" -nologo -noconfig -nostdlib -langversion:7.3 -target:exe -platform:anycpu \
      -deterministic "-pathmap:$src/=/_/src/,$dir/=/_/" "$opt" "$debug" -checksumalgorithm:SHA256 \
      "${refs[@]}" -out:"$dir/$name.dll" "$@")
  # 3.1.0 with rollForward LatestMajor: the same file runs on every installed runtime, 3.1 to 10.
  cat >"$dir/$name.runtimeconfig.json" <<'JSON'
{
  "runtimeOptions": {
    "tfm": "netcoreapp3.1",
    "rollForward": "LatestMajor",
    "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" },
    "configProperties": {
      "System.Globalization.Invariant": true,
      "System.Runtime.TieredCompilation": false
    }
  }
}
JSON
}
