#!/usr/bin/env bash
# The independent readers the flame tests check clrmap's profiles with (issue 24), installed
# from package registries into target/flame-tools (nothing global but Debian's chromium):
#   - pprof: Google's profile.proto (as pprof's own sources ship it: Debian's
#     golang-github-google-pprof-dev), compiled by Debian's protoc into a Python module
#     (py/profile_pb2.py) that Debian's python3-protobuf reads (tests put
#     /usr/lib/python3/dist-packages on PYTHONPATH, so any python3 finds it; python3-jsonschema too);
#   - speedscope: the npm `speedscope` package (its built app, loaded by Debian's headless
#     chromium from a loopback HTTP server, the profile named in its hash; tesseract reads the
#     screenshot);
#   - collapsed stacks: inferno's `inferno-flamegraph` (cargo install --locked inferno@0.12.8, which
#     works from the vendored crates where there is no crates registry).
# Idempotent: each tool is installed once. Prints nothing on success but its steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD/target/flame-tools"
mkdir -p "$root"

apt_install() { # PACKAGE...: Debian's packages, as root or through sudo
  local s=""
  [ "$(id -u)" = 0 ] || s="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $s apt-get update -qq >/dev/null
  $s apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

proto_src=/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto
if [ ! -f "$root/py/.profile-proto-3" ]; then
  echo "flame tools: protoc, Python's protobuf and jsonschema, and Google's profile.proto (Debian)"
  [ -f "$proto_src" ] && command -v protoc >/dev/null && [ -f /usr/lib/python3/dist-packages/google/protobuf/__init__.py ] \
    && [ -d /usr/lib/python3/dist-packages/jsonschema ] \
    || apt_install protobuf-compiler python3-protobuf python3-jsonschema golang-github-google-pprof-dev
  rm -rf "$root/py"
  mkdir -p "$root/py"
  # Google's own profile.proto, as pprof's sources ship it (Debian's golang-github-google-pprof-dev).
  cp "$proto_src" "$root/profile.proto"
  grep -q '^package perftools.profiles;' "$root/profile.proto"
  grep -q '^  int64 type = 1;' "$root/profile.proto"
  protoc -I "$root" --python_out="$root/py" "$root/profile.proto"
  touch "$root/py/.profile-proto-3"
fi

if [ ! -f "$root/node/node_modules/speedscope/dist/release/index.html" ]; then
  echo "flame tools: speedscope (npm)"
  mkdir -p "$root/node"
  npm install --silent --no-audit --no-fund --prefix "$root/node" speedscope@1.25.0 >/dev/null
fi

if ! command -v chromium >/dev/null || ! command -v tesseract >/dev/null; then
  echo "flame tools: chromium and tesseract (Debian)"
  apt_install chromium fonts-dejavu-core tesseract-ocr
fi

if [ ! -x "$root/cargo/bin/inferno-flamegraph" ]; then
  echo "flame tools: inferno (cargo install)"
  cargo install --quiet --locked --root "$root/cargo" inferno@0.12.8
fi
