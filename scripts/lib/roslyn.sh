# Shared by the fixture builders (build-frame-fixtures.sh, build-perf-fixture.sh): compile C#
# with Roslyn csc deterministically, and write the runtimeconfig every fixture uses. Sourced, not
# run. Needs $csc and the array refs (the 3.1.23 framework references).

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
  # 3.1.23 with rollForward LatestMajor: the same file runs on 3.1.23 and on 8.0.4.
  cat >"$dir/$name.runtimeconfig.json" <<'JSON'
{
  "runtimeOptions": {
    "tfm": "netcoreapp3.1",
    "rollForward": "LatestMajor",
    "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.23" },
    "configProperties": {
      "System.Globalization.Invariant": true,
      "System.Runtime.TieredCompilation": false
    }
  }
}
JSON
}
