#!/usr/bin/env bash
# Issue 13's overhead benchmark: a .NET program's CPU time (task-clock) and wall time, by
# `perf stat -r`, in four configurations run in interleaved rounds (so machine load hits them all
# alike): the program alone, under `clrmap profile` (capture only), under `clrmap profile --perf`
# (capture + jitdump with line records + perf map), the same with --no-inlines (perfnoinl: no
# inline trees, issue 22's "trees vs without"), with --no-stub-names (perfnostub: the runtime
# writes no perf map of its own), `clrmap profile --perf` without a capture
# (perfonly), and with the runtime's own
# DOTNET_PerfMapEnabled=1 (its jitdump and perf map, no lines); and (issue 24) under the runtime's
# own sampler, `clrmap trace collect --cpu -o T -- dotnet app.dll` (sampler: EventPipe's
# SampleProfiler from start-up, streamed to a file; no perf). CLRMAP_TRACE_BIN names the clrmap
# run for that one (default: the release build).
#   bash scripts/bench-perf-overhead.sh [ROUNDS] [RUNS_PER_ROUND]
# CHANNEL=8.0|9.0|10.0 picks the runtime (default 8.0; scripts/install-dotnet.sh installs them).
# Two programs: Frames (start-up heavy: ~850 bodies in ~0.1 s; CPU and wall time) and Hot (steady
# state: two hot loops for a fixed 3 s; its throughput, rounds done, which overhead lowers). Needs release builds (cargo build --release -p clrmap-cli -p clrmap-profiler)
# and perf (scripts/install-perf.sh). Prints one line per program and configuration: the mean of
# the per-round means, and each round's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${1:-3}"
RUNS="${2:-5}"
# The configurations, in each round's order (CONFS="baseline sampler" runs just those).
CONFS="${CONFS:-baseline capture perf perfnoinl perfnostub perfonly perfmap sampler}"
root="$PWD"
# shellcheck source=lib/runtimes.sh
. scripts/lib/runtimes.sh
DN="$(runtime_field "${CHANNEL:-8.0}" dotnet)"
B="$PWD/target/release/clrmap"
BT="${CLRMAP_TRACE_BIN:-$B}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
declare -A cpu wall rounds
conf_cmd() {
  case "$1" in
    baseline) cmd=("$DN" "$2") ;;
    capture) cmd=("$B" profile -o "$OUT/c.cap" -- "$DN" "$2") ;;
    perf) cmd=("$B" profile --perf "$OUT" -o "$OUT/c.cap" -- "$DN" "$2") ;;
    perfnoinl) cmd=("$B" profile --perf "$OUT" --no-inlines -o "$OUT/c.cap" -- "$DN" "$2") ;;
    perfnostub) cmd=("$B" profile --perf "$OUT" --no-stub-names -o "$OUT/c.cap" -- "$DN" "$2") ;;
    perfonly) cmd=("$B" profile --perf "$OUT" -- "$DN" "$2") ;;
    perfmap) cmd=(env DOTNET_PerfMapEnabled=1 DOTNET_PerfMapJitDumpPath="$OUT" "$DN" "$2") ;;
    sampler) cmd=("$BT" trace collect --cpu -o "$OUT/s.nettrace" -- "$DN" "$2") ;;
  esac
}
for ((r = 1; r <= ROUNDS; r++)); do
  for conf in $CONFS; do
    conf_cmd "$conf" tests/fixtures/perf/Hot.dll
    n="$("${cmd[@]}" 3 2>/dev/null | awk '/^rounds/ {print $2}')"
    rounds[$conf]+="$n "
    rm -f "$OUT"/jit-*.dump "$OUT"/perf-*.map "$OUT"/s.nettrace
  done
done
for conf in $CONFS; do
  c="${rounds[$conf]}"
  m=$(echo $c | tr ' ' '\n' | awk '{s+=$1} END {printf "%.1f", s/NR}')
  printf '%-7s %-9s rounds in 3 s %6s (runs: %s)\n' Hot "$conf" "$m" "$c"
done
for prog in tests/fixtures/frames/release-portable/Frames.dll; do
  name="$(basename "$prog" .dll)"
  runs="$RUNS"
  for ((r = 1; r <= ROUNDS; r++)); do
    for conf in $CONFS; do
      conf_cmd "$conf" "$prog"
      stat="$(perf stat -x, -r "$runs" -e task-clock -- "${cmd[@]}" 2>&1 >/dev/null | grep task-clock || true)"
      ms="$(echo "$stat" | cut -d, -f1)"
      # Wall time: perf stat -x prints no elapsed line, so time the same command once more.
      start=$(date +%s%N); "${cmd[@]}" >/dev/null 2>&1; end=$(date +%s%N)
      cpu[$name,$conf]+="$(printf '%.1f' "$ms") "
      wall[$name,$conf]+="$(( (end - start) / 1000000 )) "
      rm -f "$OUT"/jit-*.dump "$OUT"/perf-*.map "$OUT"/s.nettrace
    done
  done
  for conf in $CONFS; do
    c="${cpu[$name,$conf]}"; w="${wall[$name,$conf]}"
    mc=$(echo $c | tr ' ' '\n' | awk '{s+=$1} END {printf "%.1f", s/NR}')
    mw=$(echo $w | tr ' ' '\n' | awk '{s+=$1} END {printf "%.0f", s/NR}')
    printf '%-7s %-9s cpu %8s ms (rounds: %s)  wall %6s ms (rounds: %s)\n' "$name" "$conf" "$mc" "$c" "$mw" "$w"
  done
done
