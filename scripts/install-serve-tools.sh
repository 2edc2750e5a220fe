#!/usr/bin/env bash
# The tools the service's load test uses (crates/clrmap-cli/tests/cli/serve.rs,
# scale_out_behind_nginx_short, which runs scripts/bench-serve.sh): Debian's wrk (the load), nginx
# (two replicas behind one proxy) and curl. Installed with apt, as root or through sudo; prints
# their versions.
set -euo pipefail
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if [ "${#missing[@]}" -gt 0 ]; then
  s=""
  [ "$(id -u)" = 0 ] || s="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $s apt-get update -qq
  $s apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "wrk: $(command -v wrk); nginx: $(command -v nginx || echo /usr/sbin/nginx); curl: $(command -v curl)"
