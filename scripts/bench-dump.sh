#!/usr/bin/env bash
# Speed and memory of `clrmap dump` beside dotnet-dump's `clrstack -all` on the same cores.
#
# Two full cores of tests/dotnet/dump/Dumpee.cs on .NET 10 (createdump -u -f): `live` (its
# threads parked in known places) and `live-big` (the same after touching about 1 GB of heap).
# Each core is read three times by each tool; the script prints wall time, CPU time and peak
# memory of each run (GNU time), and the frames clrmap listed.
#
#   scripts/bench-dump.sh            # after `cargo test -p clrmap-cli --test cli -- --ignored dump_live_10`
#                                    # has built Dumpee (target/tmp/cli-dump/v10.0.12)
# Environment: RT (a .NET 10 install, default .dotnet/10.0), DUMPEE (Dumpee.dll built for it),
# WORK (where cores go, default target/bench-dump).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rt=${RT:-$root/.dotnet/10.0}
dumpee=${DUMPEE:-$(ls -d "$root"/target/tmp/cli-dump/v10.0.*/Dumpee.dll 2>/dev/null | head -1)}
work=${WORK:-$root/target/bench-dump}
dotnet_dump=$root/.dotnet/tools/dotnet-dump
[ -f "$dumpee" ] || { echo "no Dumpee.dll: run the dump_live_10 test first, or set DUMPEE" >&2; exit 2; }
[ -x "$dotnet_dump" ] || { echo "no dotnet-dump: run scripts/install-ms-tools.sh" >&2; exit 2; }
createdump=$(ls "$rt"/shared/Microsoft.NETCore.App/*/createdump | head -1)
mkdir -p "$work"
(cd "$root" && cargo build --release -q -p clrmap-cli)
clrmap=$root/target/release/clrmap

core_of() {
    local mode=$1 core=$work/$1.core
    rm -f "$core"
    coproc APP { exec "$rt/dotnet" "$dumpee" "$mode"; }
    local pid=""
    while IFS= read -r -t 120 line <&"${APP[0]}"; do
        case $line in ready\ *) pid=${line#ready }; break ;; esac
    done
    [ -n "$pid" ] || { echo "Dumpee ($mode) did not get ready" >&2; exit 1; }
    timeout 300 "$createdump" -u -f "$core" "$pid" > /dev/null
    echo >&"${APP[1]}" || true
    kill "$APP_PID" 2> /dev/null || true
    wait "$APP_PID" 2> /dev/null || true
    echo "$core"
}

for mode in live live-big; do
    core=$(core_of "$mode")
    size=$(stat -c %s "$core")
    echo "== $mode: $(basename "$core"), $((size / 1048576)) MiB, load $(cut -d' ' -f1 /proc/loadavg)"
    "$clrmap" dump "$core" --json > "$work/$mode.json"
    frames=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); f=[x for t in r["threads"] for x in t["frames"]]; print(len(r["threads"]), len(f), sum(1 for x in f if x["kind"]=="managed"))' "$work/$mode.json")
    echo "threads, frames, managed frames: $frames"
    for i in 1 2 3; do
        /usr/bin/time -f "clrmap dump:            %e s wall, %U+%S s CPU, %M KB peak" "$clrmap" dump "$core" > /dev/null
    done
    for i in 1 2 3; do
        /usr/bin/time -f "dotnet-dump clrstack -all: %e s wall, %U+%S s CPU, %M KB peak" timeout 600 "$dotnet_dump" analyze "$core" -c "clrstack -all" -c exit > /dev/null
    done
    rm -f "$core"
done
