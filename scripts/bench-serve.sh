#!/usr/bin/env bash
# Load and scale-out of `clrmap serve` (issue 25), on loopback only.
#
#   scripts/bench-serve.sh            # 20 s per phase, the release binary
#   BENCH_SECONDS=3 scripts/bench-serve.sh   # the short version (crates/clrmap-cli/tests/cli/serve.rs)
#
# Needs Debian's wrk, nginx and curl (apt-get install wrk nginx-light curl) and python3.
# CLRMAP_BIN picks the binary (default target/release/clrmap, else target/debug/clrmap).
#
# 1. Load: one replica, wrk with 8 connections, each request a batch of 50 frames (the Frames
#    fixture's own frames, §7 form); prints requests/s, p50/p99 latency, frames/s and the peak RSS
#    (VmHWM) after a warm-up request. Goals: >= 20,000 frames/s, p99 < 50 ms, RSS < 256 MB.
#    Then the peer: for 1, 50 and 1000 frames per request, clrmap's answer to the request is saved
#    and nginx serves that file for the same POST (a static file, as fast as an answer can be
#    sent); each is loaded in turn in the same run, and the lines `bench: peer ...` give both
#    rates, both p99s and clrmap's share of nginx's rate. nginx writes no access log, so the
#    replica compared with it runs with --request-log off; `peer-clrmap-logged-1` is the default
#    replica (a log line a request) at 1 frame. BENCH_PEERS=0 leaves it out.
# 2. Scale-out: two replicas behind nginx, sharing one cache folder that both fill from a loopback
#    symbol server (tests/symsrv/server.py) at once; the same load through nginx; then again with
#    replica 1 killed (SIGKILL) half way. Checks: both replicas answered, every answer through
#    nginx equals the single replica's, the cache holds exactly the PDB (byte for byte, no stray
#    temporary files), and after the kill requests are still answered (nginx retries on the
#    other replica: symbolication is idempotent, so POSTs may be retried).
# The last line is `bench-serve: OK` or `bench-serve: FAIL: why`, and the exit status follows it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_PHASE=${BENCH_SECONDS:-20}
BIN=${CLRMAP_BIN:-}
if [[ -z "$BIN" ]]; then
    if [[ -x "$ROOT/target/release/clrmap" ]] && "$ROOT/target/release/clrmap" serve --help > /dev/null 2>&1; then
        BIN="$ROOT/target/release/clrmap"
    else
        BIN="$ROOT/target/debug/clrmap"
    fi
fi
for tool in wrk nginx curl python3; do
    command -v "$tool" > /dev/null || { echo "bench-serve: FAIL: $tool is not installed (Debian: apt-get install wrk nginx-light curl)"; exit 1; }
done
SYMS="$ROOT/tests/fixtures/frames/debug-portable"
WORK=$(mktemp -d /tmp/clrmap-bench-serve.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
    [[ -f "$WORK/nginx/nginx.pid" ]] && kill "$(cat "$WORK/nginx/nginx.pid")" 2> /dev/null || true
    [[ -f "$WORK/nginx-static/nginx.pid" ]] && kill "$(cat "$WORK/nginx-static/nginx.pid")" 2> /dev/null || true
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "bench-serve: FAIL: $*"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Requests: 50 frames each from the runtime's own frames, by assembly name (phase 1) and by PDB
# id (phase 2, so the PDB comes from the symbol server through the shared cache).
python3 - "$ROOT" "$SYMS/Frames.pdb" "$WORK" << 'EOF'
import json, struct, sys
root, pdb, work = sys.argv[1:4]
frames = []
for line in open(f"{root}/examples/frames.stdout"):
    f = line.rstrip("\n").split("\t")
    if f[0] in ("F", "E") and f[4] == "Frames.dll":
        frames.append({"module": 0, "token": int(f[3], 16), "il_offset": int(f[6])})
batch = [frames[i % len(frames)] for i in range(50)]
for n in (1, 50, 1000):
    json.dump({"modules": [{"name": "Frames.dll"}], "frames": [frames[i % len(frames)] for i in range(n)]}, open(f"{work}/by-name-{n}.json", "w"))
b = open(pdb, "rb").read()
at = b.index(b"#Pdb\0"); off = struct.unpack("<I", b[at-8:at-4])[0]; base = b.index(b"BSJB")
g = b[base+off:base+off+16]
n = "".join(f"{x:02x}" for x in [g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6]] + list(g[8:]))
json.dump({"modules": [{"name": "Frames.dll"}], "frames": batch}, open(f"{work}/by-name.json", "w"))
json.dump({"modules": [{"name": "Frames.dll", "pdb": "Frames.pdb", "pdb_id": n}], "frames": batch}, open(f"{work}/by-id.json", "w"))
import os
os.makedirs(f"{work}/store/frames.pdb/{n}ffffffff")
open(f"{work}/store/frames.pdb/{n}ffffffff/frames.pdb", "wb").write(b)
print(n, file=open(f"{work}/key", "w"))
EOF

cat > "$WORK/post.lua" << 'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d non2xx=%d\n",
        summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
        e.connect + e.read + e.write + e.timeout, e.status))
end
EOF

# serve PORT ARGS...: start a replica, wait for its first log line.
serve() {
    local port=$1; shift
    "$BIN" serve --listen "127.0.0.1:$port" "$@" 2> "$WORK/serve-$port.log" &
    PIDS+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && return 0
        sleep 0.05
    done
    fail "replica on $port did not start: $(cat "$WORK/serve-$port.log")"
}

# load URL BODY: wrk, 8 connections, prints the RESULT line.
load() {
    BENCH_BODY="$2" wrk -t2 -c8 -d"${SECONDS_PER_PHASE}s" --latency -s "$WORK/post.lua" "$1" | grep '^RESULT'
}

field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<< "$2"; }

report() {
    local name=$1 result=$2 frames=${3:-50}
    local req dur p50 p99
    req=$(field requests "$result"); dur=$(field duration_us "$result"); p50=$(field p50_us "$result"); p99=$(field p99_us "$result")
    python3 -c "
req, dur, p50, p99 = $req, $dur, $p50, $p99
rate = req / (dur / 1e6)
print(f'bench: $name requests={req} rate={rate:.0f}/s frames_per_s={rate*$frames:.0f} p50_ms={p50/1000:.2f} p99_ms={p99/1000:.2f} socket_errors=$(field socket_errors "$result") non2xx=$(field non2xx "$result")')
"
}

peak_rss_mb() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

echo "bench-serve: binary $BIN, ${SECONDS_PER_PHASE}s per phase, $(nproc) CPUs"

# --- 1. One replica -------------------------------------------------------------------------
P1=$(free_port)
serve "$P1" --symbol-path "$SYMS"
PID1=${PIDS[-1]}
curl -sf --data-binary @"$WORK/by-name.json" "http://127.0.0.1:$P1/symbolicate" > "$WORK/direct.json" || fail "warm-up request failed"
python3 -c "import json,sys; v=json.load(open('$WORK/direct.json')); assert len(v['frames'])==50 and all(f['line'] for f in v['frames'] if f['file']), v" || fail "warm-up answer"
R=$(load "http://127.0.0.1:$P1/symbolicate" "$WORK/by-name.json")
report single "$R"
echo "bench: single peak_rss_mb=$(peak_rss_mb "$PID1")"

# --- 1b. The peer: nginx sending clrmap's own answers as static files -------------------------
if [[ "${BENCH_PEERS:-1}" != 0 ]]; then
    S=$(free_port)
    mkdir -p "$WORK/static" "$WORK/nginx-static"
    # nginx's workers (another user when started as root) read the files.
    chmod 755 "$WORK" "$WORK/static"
    cat > "$WORK/nginx-static/nginx.conf" << EOF
worker_processes auto;
daemon on;
pid $WORK/nginx-static/nginx.pid;
error_log $WORK/nginx-static/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx-static/body;
    proxy_temp_path $WORK/nginx-static/proxy;
    fastcgi_temp_path $WORK/nginx-static/fastcgi;
    uwsgi_temp_path $WORK/nginx-static/uwsgi;
    scgi_temp_path $WORK/nginx-static/scgi;
    server {
        listen 127.0.0.1:$S;
        root $WORK/static;
        # The static module answers only GET and HEAD: a POST is sent the file all the same.
        location / { error_page 405 =200 \$uri; }
    }
}
EOF
    nginx -p "$WORK/nginx-static" -c "$WORK/nginx-static/nginx.conf" || fail "the static nginx did not start"
    # Like with like: nginx writes no access log, so the replica compared with it writes no
    # request log (--request-log off); the replica above (the default, a line a request) is
    # loaded once more at 1 frame, for what the line costs.
    P2=$(free_port)
    serve "$P2" --symbol-path "$SYMS" --request-log off
    PID2=${PIDS[-1]}
    echo "bench: load before the peers: $(cut -d' ' -f1-3 /proc/loadavg)"
    for n in 1 50 1000; do
        curl -sf --data-binary @"$WORK/by-name-$n.json" "http://127.0.0.1:$P1/symbolicate" > "$WORK/static/answer-$n.json" || fail "the $n-frame request failed"
        curl -sf --data-binary @"$WORK/by-name-$n.json" "http://127.0.0.1:$P2/symbolicate" | cmp -s - "$WORK/static/answer-$n.json" || fail "the replica without a request log answers the $n-frame request otherwise"
        curl -sf --data-binary @"$WORK/by-name-$n.json" "http://127.0.0.1:$S/answer-$n.json" | cmp -s - "$WORK/static/answer-$n.json" || fail "nginx does not send the $n-frame answer"
        RC=$(load "http://127.0.0.1:$P2/symbolicate" "$WORK/by-name-$n.json")
        RN=$(load "http://127.0.0.1:$S/answer-$n.json" "$WORK/by-name-$n.json")
        report "peer-clrmap-$n" "$RC" "$n"
        report "peer-nginx-$n" "$RN" "$n"
        python3 -c "
c, cd, n, nd = $(field requests "$RC"), $(field duration_us "$RC"), $(field requests "$RN"), $(field duration_us "$RN")
rc, rn = c / (cd / 1e6), n / (nd / 1e6)
print(f'bench: peer frames=$n clrmap_rate={rc:.0f}/s nginx_rate={rn:.0f}/s share={rc / rn * 100:.0f}% clrmap_frames_per_s={rc * $n:.0f} clrmap_p99_ms={$(field p99_us "$RC") / 1000:.2f} nginx_p99_ms={$(field p99_us "$RN") / 1000:.2f}')
"
    done
    report "peer-clrmap-logged-1" "$(load "http://127.0.0.1:$P1/symbolicate" "$WORK/by-name-1.json")" 1
    kill "$PID2"
    echo "bench: load after the peers: $(cut -d' ' -f1-3 /proc/loadavg)"
    kill "$(cat "$WORK/nginx-static/nginx.pid")" 2> /dev/null || true
fi
kill "$PID1"

# --- 2. Two replicas behind nginx, one shared cache -----------------------------------------
python3 "$ROOT/tests/symsrv/server.py" --root "$WORK/store" --mode ok > "$WORK/symsrv.port" 2> /dev/null &
PIDS+=($!)
for _ in $(seq 100); do [[ -s "$WORK/symsrv.port" ]] && break; sleep 0.05; done
SYMSRV="http://127.0.0.1:$(head -1 "$WORK/symsrv.port")"
CACHE="$WORK/cache"
A=$(free_port); B=$(free_port); N=$(free_port)
serve "$A" --symbol-server "$SYMSRV" --cache "$CACHE"
PIDA=${PIDS[-1]}
serve "$B" --symbol-server "$SYMSRV" --cache "$CACHE"
PIDB=${PIDS[-1]}
mkdir -p "$WORK/nginx"
cat > "$WORK/nginx/nginx.conf" << EOF
worker_processes 1;
daemon on;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    client_max_body_size 8m;
    upstream clrmap {
        server 127.0.0.1:$A max_fails=1 fail_timeout=5s;
        server 127.0.0.1:$B max_fails=1 fail_timeout=5s;
        keepalive 16;
    }
    server {
        listen 127.0.0.1:$N;
        location / {
            proxy_pass http://clrmap;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # Symbolication is idempotent: a POST may be retried on the other replica.
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_connect_timeout 1s;
        }
    }
}
EOF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" || fail "nginx did not start"
# Both replicas fill the one cache entry at once (each asks the server itself).
curl -sf --data-binary @"$WORK/by-id.json" "http://127.0.0.1:$A/symbolicate" > "$WORK/a.json" &
FILL_A=$!
curl -sf --data-binary @"$WORK/by-id.json" "http://127.0.0.1:$B/symbolicate" > "$WORK/b.json" &
FILL_B=$!
wait "$FILL_A" "$FILL_B" || fail "a first request through the shared cache failed"
# The answers: the single replica's, less the method names (the server holds no assembly).
python3 - "$WORK" << 'EOF' || fail "answers through the shared cache differ from the single replica's"
import json, sys
w = sys.argv[1]
direct = json.load(open(f"{w}/direct.json"))["frames"]
for f in direct:
    f["method"] = None
for name in ("a", "b"):
    got = json.load(open(f"{w}/{name}.json"))["frames"]
    assert got == direct, (name, got[:2], direct[:2])
EOF
R=$(load "http://127.0.0.1:$N/symbolicate" "$WORK/by-id.json")
report nginx-2-replicas "$R"
count() { curl -sf "http://127.0.0.1:$1/metrics" | awk '$1 == "clrmap_requests_total{endpoint=\"symbolicate\",status=\"200\"}" {print $2}'; }
CA=$(count "$A"); CB=$(count "$B")
echo "bench: spread replica_a=$CA replica_b=$CB"
[[ "${CA:-0}" -gt 10 && "${CB:-0}" -gt 10 ]] || fail "the load was not spread across both replicas ($CA, $CB)"
echo "bench: nginx-2-replicas peak_rss_mb a=$(peak_rss_mb "$PIDA") b=$(peak_rss_mb "$PIDB")"
for i in $(seq 20); do
    curl -sf --data-binary @"$WORK/by-id.json" "http://127.0.0.1:$N/symbolicate" | cmp -s - "$WORK/a.json" || fail "answer $i through nginx differs"
done
# The cache: exactly the PDB, byte for byte, nothing else.
ENTRY="$CACHE/frames.pdb/$(cat "$WORK/key")ffffffff/frames.pdb"
cmp -s "$ENTRY" "$SYMS/Frames.pdb" || fail "cache entry $ENTRY is not the PDB"
[[ $(find "$CACHE" -type f | wc -l) -eq 1 ]] || fail "stray files in the cache: $(find "$CACHE" -type f)"
# Kill replica A half way through a run.
( sleep "$(python3 -c "print($SECONDS_PER_PHASE / 2)")"; kill -9 "$PIDA" ) &
R=$(load "http://127.0.0.1:$N/symbolicate" "$WORK/by-id.json")
report nginx-one-killed "$R"
[[ "$(field non2xx "$R")" -eq 0 ]] || fail "requests failed after the kill: $R"
for i in $(seq 10); do
    curl -sf --data-binary @"$WORK/by-id.json" "http://127.0.0.1:$N/symbolicate" | cmp -s - "$WORK/a.json" || fail "answer $i after the kill differs"
done
echo "bench: after-kill answers equal, replica_b=$(count "$B")"
echo "bench-serve: OK"
