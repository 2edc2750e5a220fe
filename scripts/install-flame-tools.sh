#!/usr/bin/env bash
# The independent readers the flame tests check clrmap's profiles with (issue 24), installed
# from package registries into target/flame-tools (nothing global but Debian's chromium):
#   - pprof: Google's profile.proto (as the crates.io `pprof` crate ships it, fetched by cargo),
#     compiled by protoc from PyPI's grpcio-tools into a Python module (py/profile_pb2.py);
#   - speedscope: the npm `speedscope` package (its built app, loaded by Debian's headless
#     chromium from a loopback HTTP server, the profile named in its hash; tesseract reads the
#     screenshot);
#   - collapsed stacks: inferno's `inferno-flamegraph` (cargo install).
# Idempotent: each tool is installed once. Prints nothing on success but its steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD/target/flame-tools"
mkdir -p "$root"

if [ ! -f "$root/py/.profile-proto-2" ]; then
  echo "flame tools: grpcio-tools (protoc) and profile.proto"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$root/py" grpcio-tools jsonschema
  fetch="$root/proto-fetch"
  mkdir -p "$fetch/src"
  printf '[package]\nname = "proto-fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\npprof = { version = "=0.14.1", default-features = false }\n[workspace]\n' > "$fetch/Cargo.toml"
  echo 'fn main() {}' > "$fetch/src/main.rs"
  (cd "$fetch" && cargo fetch --quiet)
  proto="$(cd "$fetch" && cargo metadata --format-version 1 | python3 -c 'import json,sys; m=json.load(sys.stdin); print([p["manifest_path"] for p in m["packages"] if p["name"]=="pprof"][0])')"
  # That copy renames ValueType's `type` to `ty` (a Rust keyword); Google's name is put back.
  sed -e 's/^  int64 ty = 1;/  int64 type = 1;/' -e '/Rename it from type to ty/d' "$(dirname "$proto")/proto/profile.proto" > "$root/profile.proto"
  grep -q '^package perftools.profiles;' "$root/profile.proto"
  grep -q '^  int64 type = 1;' "$root/profile.proto"
  PYTHONPATH="$root/py" python3 -m grpc_tools.protoc -I "$root" --python_out="$root/py" "$root/profile.proto"
  touch "$root/py/.profile-proto-2"
fi

if [ ! -f "$root/node/node_modules/speedscope/dist/release/index.html" ]; then
  echo "flame tools: speedscope (npm)"
  mkdir -p "$root/node"
  npm install --silent --no-audit --no-fund --prefix "$root/node" speedscope@1.25.0 >/dev/null
fi

if ! command -v chromium >/dev/null || ! command -v tesseract >/dev/null; then
  echo "flame tools: chromium and tesseract (Debian)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium fonts-dejavu-core tesseract-ocr >/dev/null
fi

if [ ! -x "$root/cargo/bin/inferno-flamegraph" ]; then
  echo "flame tools: inferno (cargo install)"
  cargo install --quiet --locked --root "$root/cargo" inferno@0.12.8
fi
