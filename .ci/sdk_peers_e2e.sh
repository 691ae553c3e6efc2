#!/usr/bin/env bash
# The exporter and `mcp_exporter check` against real SDK servers, one install for both runs:
#   legacy (.ci/sdk_peers_e2e.py): Python `mcp` (low-level Server), `fastmcp`, and the TypeScript SDK
#     1.x (low-level Server + StreamableHTTPServerTransport), 14 tools 5 per page, changes announced;
#   modern (.ci/modern_peers_e2e.py): Python `mcp` 2.3 and the TypeScript SDK v2 in the 2026-07-28
#     era (server/discover, subscriptions/listen, ttlMs/cacheScope), announced and unannounced swaps,
#     and legacy clients (pinned 2025-11-25) of the same servers; and the legacy-only transports:
#     HTTP+SSE (Python SseServerTransport, TypeScript SDK 1.32) and stdio (Python SDK).
#
# Usage: .ci/sdk_peers_e2e.sh WORKDIR EXPORTER_BIN
# Installs the pinned peers under WORKDIR with .ci/peers/install.sh (skipped when already there).
# Bounded: each install and the whole run have deadlines.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
log() { printf '[sdk_peers %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# ---- Python and TypeScript peers, pinned (one install shared with .ci/peers/verify_wire.py)
peer_env=$(timeout 1800 bash "$here/peers/install.sh" "$root")
eval "$peer_env"
log "setup took $(($(date +%s) - started)) s"

# ---- the runs (each .py has its own deadlines; these are the backstops)
run_started=$(date +%s)
timeout -k 10 300 "$PEER_PY" "$here/sdk_peers_e2e.py" --work "$root/sdk_peers" --bin "$bin" \
  --node "$PEER_NODE" --node-path "$PEER_NODE_PATH"
log "PASS legacy peers: run took $(($(date +%s) - run_started)) s"
run_started=$(date +%s)
timeout -k 10 300 "$PEER_PY" "$here/modern_peers_e2e.py" --work "$root/modern_peers" --bin "$bin" \
  --node "$PEER_NODE" --node-path "$PEER_NODE_PATH"
log "PASS modern peers: run took $(($(date +%s) - run_started)) s, $(($(date +%s) - started)) s in all"
