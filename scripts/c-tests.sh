#!/usr/bin/env bash
# C ABI tests: compile crates/clrmap-capi/c-tests with gcc against include/clrmap.h and the built
# libclrmap_capi.so, run them under valgrind (no leak, no invalid access), and check their answers:
#   - dictionary types equal what `clrmap dict lookup` prints for a map built by the CLI;
#   - IL maps of real R2R methods (3.1.23 CoreLib) equal what the live runtime answered, as
#     recorded by `clrmap profile` on the test workload.
# Needs `cargo build --workspace` first (scripts/test.sh does it) and the runtimes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=target/c-tests
mkdir -p "$out"
lib=target/debug
if ! command -v valgrind >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
  else
    echo "c-tests: valgrind is missing" >&2; exit 1
  fi
fi
# The generated header is plain C99, and C++11 compiles it (tests/header.rs checks it is fresh).
gcc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/test_capi.c
# The C++ test must use every name the header declares: macros, constants, IIDs, types, functions.
python3 - crates/clrmap-capi/include/clrmap.h crates/clrmap-capi/c-tests/test_cpp.cpp <<'PY'
import re, sys
header, test = (open(p).read() for p in sys.argv[1:3])
names = set(re.findall(r"^#define (\w+)", header, re.M)) - {"CLRMAP_H"}
names |= set(re.findall(r"^typedef struct (\w+)", header, re.M))
names |= set(re.findall(r"^typedef [^;(\n{]*?(\w+);", header, re.M))
names |= set(re.findall(r"^typedef [^;]*\(\*(\w+)\)", header, re.M))
names |= set(re.findall(r"^extern const struct \w+ (\w+);", header, re.M))
names |= set(re.findall(r"^\w[\w *]*?\b(clrmap_\w+)\(", header, re.M))
used = set(re.findall(r"\w+", test))
missing = sorted(names - used)
assert not missing, f"test_cpp.cpp does not use: {' '.join(missing)}"
assert len(names) > 60, len(names)
print(f"c-tests: test_cpp.cpp uses all {len(names)} names of clrmap.h")
PY
if ! command -v g++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
  else
    echo "c-tests: g++ is missing" >&2; exit 1
  fi
fi
g++ -std=c++11 -pedantic -Wall -Wextra -Werror -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/test_cpp.cpp \
  -L "$lib" -lclrmap_capi -Wl,-rpath,"$PWD/$lib" -o "$out/test_cpp"
# docs/c-abi.md's example, extracted from the page: it must compile, and answer as the page says.
# The page's first C block is the complete example; later ones are snippets.
awk '/^```c$/ && !done { on = 1; next } /^```$/ && on { on = 0; done = 1 } on' docs/c-abi.md > "$out/symbolize.c"
gcc -std=c11 -Wall -Wextra -Werror -I crates/clrmap-capi/include "$out/symbolize.c" \
  -L "$lib" -lclrmap_capi -Wl,-rpath,"$PWD/$lib" -o "$out/symbolize"
gcc -std=c11 -Wall -Wextra -Werror -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/test_capi.c \
  -L "$lib" -lclrmap_capi -Wl,-rpath,"$PWD/$lib" -o "$out/test_capi"
gcc -std=c11 -Wall -Wextra -Werror -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/test_symbolizer.c \
  -L "$lib" -lclrmap_capi -Wl,-rpath,"$PWD/$lib" -o "$out/test_symbolizer"

root="$PWD"
# shellcheck source=lib/runtimes.sh
. scripts/lib/runtimes.sh
# The oldest installed runtime's CoreLib (3.1 where installed) for the workload's R2R maps.
oldest="$(runtime_channels | head -n1)"
fw="$(runtime_field "$oldest" framework)"
dotnet="$(runtime_field "$oldest" dotnet)"
clrmap="$lib/clrmap"

# A map built by the CLI, and the RVAs to ask about.
"$clrmap" dict build examples/two-lists.manifest -o "$out/two-lists.gdmap" --sort >/dev/null
rvas=(0x1000 0x2010 0x2020 0x3010 0x3020)

valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q "$out/test_cpp" "$out/two-lists.gdmap"
valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q \
  "$out/symbolize" examples/frames.nettrace tests/fixtures/frames/debug-embedded 0x7F8CE5225927 > "$out/symbolize.txt"
expected=$(awk '/^```console$/ { on = 1; next } /^```$/ { on = 0 } on && !/^\$ /' docs/c-abi.md)
[ "$(cat "$out/symbolize.txt")" = "$expected" ] || { echo "c-tests: docs/c-abi.md's example printed '$(cat "$out/symbolize.txt")', the page says '$expected'" >&2; exit 1; }
echo "c-tests: docs/c-abi.md's example compiles and prints what the page says; valgrind clean"

# A live capture of the workload: the runtime's own maps of the R2R methods it ran.
mcs -out:"$out/Workload.dll" -r:System.Core.dll tests/dotnet/programs/Workload.cs >/dev/null
printf '%s' '{ "runtimeOptions": { "tfm": "netcoreapp3.1", "rollForward": "LatestMajor", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" }, "configProperties": { "System.Globalization.Invariant": true } } }' > "$out/Workload.runtimeconfig.json"
"$clrmap" profile -o "$out/workload.capture" --profiler "$lib/libclrmap_profiler.so" -- "$dotnet" "$out/Workload.dll" >/dev/null
mapfile -t addrs < <(python3 - "$out/workload.capture" <<'PY'
import json, sys
seen = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "r2r" and r["module"].endswith("/System.Private.CoreLib.dll") and r["rva"] not in seen:
        seen.append(r["rva"])
for rva in seen[:60]:
    print(hex(rva))
PY
)
[ "${#addrs[@]}" -ge 50 ] || { echo "c-tests: only ${#addrs[@]} CoreLib R2R methods captured" >&2; exit 1; }

# CoreLib with its CodeView debug entry turned into an embedded portable PDB (type 17, PE-COFF.md)
# that inflates to a 32-byte metadata root declaring one stream header it lacks: the error is at
# offset 32 of the inflated PDB (test_capi.c's test_inflated).
python3 - "$fw/System.Private.CoreLib.dll" "$out/inflated-CoreLib.dll" <<'PY'
import struct, sys, zlib
img = bytearray(open(sys.argv[1], "rb").read())
pe = struct.unpack_from("<I", img, 0x3C)[0]
nsec, opt_size = struct.unpack_from("<H", img, pe + 6)[0], struct.unpack_from("<H", img, pe + 20)[0]
opt = pe + 24
dirs = opt + (112 if struct.unpack_from("<H", img, opt)[0] == 0x20B else 96)
dbg_rva, dbg_size = struct.unpack_from("<II", img, dirs + 6 * 8)
def to_file(rva):
    for i in range(nsec):
        s = opt + opt_size + 40 * i
        vsize, va, rsize, raw = struct.unpack_from("<IIII", img, s + 8)
        if va <= rva < va + max(vsize, rsize):
            return raw + rva - va
    raise SystemExit("debug directory outside every section")
at = to_file(dbg_rva)
entries = [at + 28 * i for i in range(dbg_size // 28)]
cv = next(e for e in entries if struct.unpack_from("<I", img, e + 12)[0] == 2)
version = b"PDB v1.0\0\0\0\0"
pdb = b"BSJB" + struct.pack("<HHII", 1, 1, 0, len(version)) + version + struct.pack("<HH", 0, 1)
assert len(pdb) == 32
deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
data = b"MPDB" + struct.pack("<I", len(pdb)) + deflate.compress(pdb) + deflate.flush()
img += b"\0" * (-len(img) % 16)
struct.pack_into("<IIII", img, cv + 12, 17, len(data), 0, len(img))
img += data
open(sys.argv[2], "wb").write(img)
PY

CLRMAP_TEST_INFLATED_IMAGE="$out/inflated-CoreLib.dll" valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q \
  "$out/test_capi" "$out/two-lists.gdmap" "${#rvas[@]}" "${rvas[@]}" "$fw/System.Private.CoreLib.dll" "${addrs[@]}" > "$out/c-output.txt"

python3 - "$out/c-output.txt" "$out/workload.capture" "$clrmap" "$out/two-lists.gdmap" <<'PY'
import json, subprocess, sys
out, capture, clrmap, gdmap = sys.argv[1:5]
lines = open(out).read().split("\n")
# Dictionary lookups: the C text equals `clrmap dict lookup`.
i, dicts = 0, 0
while i < len(lines):
    if lines[i].startswith("dict "):
        rva = lines[i].split()[1]
        cli = subprocess.run([clrmap, "dict", "lookup", gdmap, rva], capture_output=True, text=True, check=True).stdout.rstrip("\n").split("\n")
        assert lines[i + 1:i + 1 + len(cli)] == cli, (rva, cli, lines[i + 1:i + 1 + len(cli)])
        dicts += 1
        i += 1 + len(cli)
    else:
        i += 1
# IL maps: the C answers equal the live runtime's capture.
live = {}
for line in open(capture):
    r = json.loads(line)
    if r.get("kind") == "r2r" and r["module"].endswith("/System.Private.CoreLib.dll"):
        live[r["rva"]] = [tuple(e) for e in r["map"]]
maps = 0
for l in lines:
    if l.startswith("map "):
        parts = l.split()
        rva = int(parts[1], 16)
        ours = [tuple(int(x) for x in e.split(",")) for e in parts[2:]]
        assert ours == live[rva], (hex(rva), ours, live[rva])
        maps += 1
assert dicts == 5 and maps >= 50, (dicts, maps)
print(f"c-tests: {dicts} dictionary lookups equal to the CLI, {maps} R2R maps from C equal to the live runtime's; valgrind clean")
PY

# The symbolizer: a live capture of the Roslyn-built Frames fixture (tiering off, PDB beside it in a
# symbol directory), addresses inside each of its jitted bodies, and the C answers compared with
# `clrmap symbolize --json --return-address`.
rm -rf "$out/frames" && mkdir -p "$out/frames" && cp tests/fixtures/frames/debug-portable/* "$out/frames/"
COMPlus_TieredCompilation=0 "$clrmap" profile -o "$out/frames.capture" --profiler "$lib/libclrmap_profiler.so" -- "$dotnet" "$out/frames/Frames.dll" >/dev/null
mapfile -t faddrs < <(python3 - "$out/frames.capture" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "jit" and r["module"].endswith("/Frames.dll"):
        for off in (1, r["code_size"] // 2, r["code_size"] - 1):
            print(hex(r["start"] + off))
PY
)
[ "${#faddrs[@]}" -ge 100 ] || { echo "c-tests: only ${#faddrs[@]} Frames.dll addresses" >&2; exit 1; }
valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q \
  "$out/test_symbolizer" "$out/frames.capture" "$out/frames" tests/fixtures/frames/release-portable/Frames.pdb "${faddrs[@]}" 0x10 > "$out/c-symbolizer.txt"
"$clrmap" symbolize --json --return-address "$out/frames.capture" --symbol-path "$out/frames" "${faddrs[@]}" 0x10 > "$out/cli-symbolizer.jsonl"
python3 - "$out/c-symbolizer.txt" "$out/cli-symbolizer.jsonl" <<'PY'
import json, sys
c = [l[len("frame "):].rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.startswith("frame ")]
cli = [json.loads(l) for l in open(sys.argv[2])]
assert len(c) == len(cli) and len(c) >= 100, (len(c), len(cli))
with_line = 0
for (addr, flags, token, il, module, method, file, line, col, eline, ecol), j in zip(c, cli):
    assert int(addr) == j["address"], (addr, j)
    known = j["token"] is not None
    assert (int(flags) & 1 == 1) == known, (addr, flags, j)
    assert bool(int(flags) & 4) == (j["il_offset"] is not None), (addr, flags, j)
    if known:
        assert (int(token), int(il), module, method) == (j["token"], j["il_offset"], j["module"], j["method"]), (addr, j)
    if j["line"] is not None:
        with_line += 1
        assert int(flags) & 2 and (file, int(line), int(col), int(eline), int(ecol)) == (j["file"], j["line"], j["column"], j["end_line"], j["end_column"]), (addr, j)
    else:
        assert int(flags) & 2 == 0 and file == "", (addr, j)
assert with_line >= 100, with_line
print(f"c-tests: {len(c)} addresses symbolized from C equal to `clrmap symbolize` ({with_line} with a source line); valgrind clean")
PY

# A running process (clrmap_profiler_info_open_pid, clrmap_symbolizer_open_pid): the Attach program,
# started under the launch-time profiler on each runtime, waits on a FIFO; test_pid takes rundown
# snapshots of it through its diagnostics port. Every map GetILToNativeMapping3 answers through the
# vtable must equal what the runtime answered the profiler in the same process, for the same code
# start; one address symbolizes as `clrmap symbolize --pid` says; a missing pid is
# CLRMAP_E_NO_SUCH_PROCESS.
gcc -std=c11 -Wall -Wextra -Werror -I crates/clrmap-capi/include crates/clrmap-capi/c-tests/test_pid.c \
  -L "$lib" -lclrmap_capi -Wl,-rpath,"$PWD/$lib" -o "$out/test_pid"
mcs -out:"$out/Attach.dll" -r:System.Core.dll tests/dotnet/attach/Attach.cs >/dev/null
missing_pid=$(cat /proc/sys/kernel/pid_max) # pids are below pid_max: no process has this one
for channel in $(runtime_channels); do
  version="$(runtime_field "$channel" version)"
  rt_dotnet="$(runtime_field "$channel" dotnet)"
  case "$channel" in 3.1) tfm=netcoreapp3.1 ;; *) tfm="net$channel" ;; esac
  dir="$out/attach-$version"
  rm -rf "$dir" && mkdir -p "$dir" && cp "$out/Attach.dll" "$dir/"
  printf '{ "runtimeOptions": { "tfm": "%s", "framework": { "name": "Microsoft.NETCore.App", "version": "%s" }, "configProperties": { "System.Globalization.Invariant": true } } }' \
    "$tfm" "$version" > "$dir/Attach.runtimeconfig.json"
  mkfifo "$dir/stdin"
  env -u DOTNET_EnableDiagnostics -u COMPlus_EnableDiagnostics -u DOTNET_EnableEventPipe -u COMPlus_EnableEventPipe \
    CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER='{8C0F4F8E-6A3B-4C1E-9D2A-5B7E3C1F0A11}' \
    CORECLR_PROFILER_PATH="$PWD/$lib/libclrmap_profiler.so" CLRMAP_PROFILER_OUTPUT="$dir/capture.jsonl" \
    "$rt_dotnet" "$dir/Attach.dll" < "$dir/stdin" > "$dir/stdout" &
  target=$!
  trap 'kill "$target" 2>/dev/null || true' EXIT
  exec 3>"$dir/stdin" # the program reads "exit" from here; closing it ends the program too
  for _ in $(seq 300); do grep -qx ready "$dir/stdout" && break; sleep 0.1; done
  grep -qx ready "$dir/stdout" || { echo "c-tests: the Attach program ($version) never said ready" >&2; exit 1; }
  valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q \
    "$out/test_pid" "$target" "$dir/capture.jsonl" "$missing_pid" > "$dir/c-pid.txt"
  address=$(awk -F'\t' '/^frame / { sub(/^frame /, "", $1); print $1 }' "$dir/c-pid.txt")
  "$clrmap" symbolize --json --pid "$target" "$address" > "$dir/cli-pid.jsonl"
  echo exit >&3
  exec 3>&-
  wait "$target" || { echo "c-tests: the Attach program ($version) did not exit cleanly" >&2; exit 1; }
  trap - EXIT
  python3 - "$version" "$dir/c-pid.txt" "$dir/capture.jsonl" "$dir/cli-pid.jsonl" <<'PY'
import json, sys
version, out, capture, cli = sys.argv[1:5]
live = {}
for line in open(capture):
    r = json.loads(line)
    if r.get("kind") == "jit":
        live[(r["function_id"], r["start"])] = [tuple(e) for e in r["map"]]
lines = [l.rstrip("\n").split(" ") for l in open(out)]
maps = absent = 0
for l in lines:
    if l[0] == "map":
        key = (int(l[1]), int(l[2]))
        ours = [tuple(int(x) for x in e.split(",")) for e in l[3:]]
        assert ours == live[key], (version, key, ours, live[key])
        maps += 1
    elif l[0] == "absent":
        absent += 1
    assert l[0] != "unseen", (version, "a FunctionID of the snapshot that the profiler never saw", l)
assert maps >= 100, (version, maps)
frame = [l for l in open(out) if l.startswith("frame ")][0][len("frame "):].rstrip("\n").split("\t")
j = json.loads(open(cli).read())
assert (int(frame[0]), int(frame[2]), int(frame[3]), frame[4], frame[5]) == (j["address"], j["token"], j["il_offset"], j["module"], j["method"]), (version, frame, j)
missing = [l for l in lines if l[0] == "missing"]
assert missing and "no_such_process" in " ".join(missing[0]), missing
print(f"c-tests: {version}: {maps} maps of a running process from C equal to GetILToNativeMapping3 in it"
      f" ({absent} recorded code starts not in the snapshot); {frame[5]} as `clrmap symbolize --pid`; a missing pid is no_such_process; valgrind clean")
PY
done
