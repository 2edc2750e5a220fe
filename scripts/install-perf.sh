#!/usr/bin/env bash
# Install Linux perf (Debian's linux-perf) for the perf tests (crates/clrmap-cli/tests/cli/perf.rs)
# and addr2line (binutils), which perf uses for srcline, and GNU time (/usr/bin/time), with which
# the perf tests measure peak memory. Prints `perf: PATH` when done.
# perf record needs perf_event_paranoid <= 2 for user-space cpu-clock sampling of one's own
# processes (the default on Debian is 2 or 3; the tests record their own child only).
set -euo pipefail
if ! command -v perf >/dev/null 2>&1 || ! perf --version >/dev/null 2>&1 || ! command -v addr2line >/dev/null 2>&1 || [ ! -x /usr/bin/time ]; then
  export DEBIAN_FRONTEND=noninteractive
  sudo_="" ; [ "$(id -u)" = 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  $sudo_ apt-get install -y -qq linux-perf binutils time >/dev/null
fi
# llvm-symbolizer (Debian's llvm), the layout oracle of crates/clrmap-cli/tests/cli/inlines.rs.
command -v llvm-symbolizer >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; s=""; [ "$(id -u)" = 0 ] || s="sudo"; $s apt-get update -qq; $s apt-get install -y -qq llvm >/dev/null; }
perf --version >/dev/null
echo "perf: $(command -v perf) ($(perf --version))"
