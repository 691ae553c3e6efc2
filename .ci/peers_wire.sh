#!/usr/bin/env bash
# What the real SDK peers of .ci/peers/ do on the wire, proven with raw HTTP and pipes
# (.ci/peers/verify_wire.py): the modern-era peers (Python mcp 2.3, TypeScript SDK v2), the
# legacy-only TypeScript SDK 1.32, HTTP+SSE (Python, TypeScript) and stdio (Python). No exporter is
# involved: this pins the peers' behaviour that the exporter's end-to-end checks rely on, so an SDK
# that changes under a pin (or a pin bump) fails here, with the differing fact named.
#
# Usage: .ci/peers_wire.sh WORKDIR       (installs into WORKDIR like .ci/sdk_peers_e2e.sh; shared)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 WORKDIR" >&2; exit 2; }
root=$(mkdir -p "$1" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
peer_env=$(timeout 1800 bash "$here/peers/install.sh" "$root")
eval "$peer_env"
printf '[peers_wire %3ss] installed\n' "$(($(date +%s) - started))"
timeout -k 10 300 python3 "$here/peers/verify_wire.py" --venv-python "$PEER_PY" --node "$PEER_NODE" \
  --node-path "$PEER_NODE_PATH" --logs "$root/peers_wire" --facts "$root/peers_wire/facts.json"
printf '[peers_wire %3ss] PASS\n' "$(($(date +%s) - started))"
