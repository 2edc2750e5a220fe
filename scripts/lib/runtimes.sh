# The runtimes scripts/install-dotnet.sh installed, for the scripts: sourced after $root is set.
# ${CLRMAP_DOTNET_HOME:-$root/.dotnet}/runtimes.tsv has one line per runtime: channel, version,
# the `dotnet` host, the framework directory (the tests read the same list: tests/support/runtimes.rs).

dotnet_home="${CLRMAP_DOTNET_HOME:-$root/.dotnet}"

# runtime_field CHANNEL FIELD: FIELD (version, dotnet, framework) of the runtime of CHANNEL (3.1,
# 8.0, 9.0, 10.0), installing the runtimes first if the list is missing; exit 1 if there is none.
runtime_field() {
  local want="$1" field="$2" channel version dotnet fw
  [ -f "$dotnet_home/runtimes.tsv" ] || bash "$root/scripts/install-dotnet.sh" >/dev/null
  while IFS=$'\t' read -r channel version dotnet fw; do
    if [ "$channel" = "$want" ]; then
      case "$field" in
        version) echo "$version" ;;
        dotnet) echo "$dotnet" ;;
        framework) echo "$fw" ;;
      esac
      return 0
    fi
  done <"$dotnet_home/runtimes.tsv"
  echo "no .NET $want runtime in $dotnet_home/runtimes.tsv (scripts/install-dotnet.sh)" >&2
  return 1
}

# runtime_channels: every installed channel, oldest first, one per line.
runtime_channels() {
  [ -f "$dotnet_home/runtimes.tsv" ] || bash "$root/scripts/install-dotnet.sh" >/dev/null
  cut -f1 "$dotnet_home/runtimes.tsv"
}
