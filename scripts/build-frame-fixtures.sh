#!/usr/bin/env bash
# Build the frame-oracle fixtures: tests/dotnet/frames/*.cs compiled by Roslyn csc 2.10 (scripts/install-roslyn.sh)
# against the 3.1 framework, deterministically, into four variants:
#   tests/fixtures/frames/{debug-portable,debug-embedded,release-portable,release-embedded}/Frames.dll
#   (+ Frames.pdb for the portable ones, + Frames.runtimeconfig.json: 3.1.0 with rollForward LatestMajor,
#   so the same file runs on every installed runtime; invariant globalization; tiered compilation off).
# Options: --check  build into a temp dir and compare with the committed fixtures (exit 1 if they differ).
#          --run    afterwards run each variant on every installed runtime and print a summary of F lines.
# The output is byte-identical wherever it is built: -deterministic, and -pathmap maps the source
# directory to /_/src/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/roslyn.sh
. "$root/scripts/lib/roslyn.sh"
src="$root/tests/dotnet/frames"
out="$root/tests/fixtures/frames"
fixture_options "--check --run" "$@"

roslyn_setup

refs=()
for a in System.Private.CoreLib System.Runtime System.Console System.Linq System.Collections \
         System.Threading System.Threading.Thread System.Threading.Tasks System.Diagnostics.StackTrace System.Runtime.Extensions; do
  refs+=("-r:$fw/$a.dll")
done
mapfile -t sources < <(cd "$src" && ls -1 ./*.cs | sed 's|^\./||' | LC_ALL=C sort)

build() { # variant dir
  local variant="$1" dir="$2" opt debug
  case "$variant" in
    debug-*) opt="-optimize-" ;;
    release-*) opt="-optimize+" ;;
  esac
  case "$variant" in
    *-portable) debug="-debug:portable" ;;
    *-embedded) debug="-debug:embedded" ;;
  esac
  roslyn_compile "$src" "$dir" Frames "$opt" "$debug" "${sources[@]}"
}

variants="debug-portable debug-embedded release-portable release-embedded"
if [ "$check" = 1 ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  status=0
  for v in $variants; do
    build "$v" "$tmp/$v"
    if ! diff -r "$tmp/$v" "$out/$v" >/dev/null; then
      echo "build-frame-fixtures: $v differs from tests/fixtures/frames/$v" >&2
      status=1
    fi
  done
  [ "$status" = 0 ] && echo "build-frame-fixtures: all variants are byte-identical to the committed fixtures"
  exit "$status"
fi

for v in $variants; do
  build "$v" "$out/$v"
done
(cd "$out" && find . -type f | LC_ALL=C sort | xargs ls -l)

if [ "$run" = 1 ]; then
  for v in $variants; do
    for rt in $(runtime_channels); do
      dn="$(runtime_field "$rt" dotnet)"
      o="$(COMPlus_TieredCompilation=0 DOTNET_TieredCompilation=0 "$dn" "$out/$v/Frames.dll")"
      f="$(grep -c '^F' <<<"$o" || true)"
      lines="$(awk -F'\t' '$1=="F" && $9!=0' <<<"$o" | wc -l)"
      e="$(grep -c '^E' <<<"$o" || true)"
      echo "$v on $rt: $f F lines ($lines with a line number), $e E lines"
    done
  done
fi
