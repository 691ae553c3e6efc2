#!/usr/bin/env bash
# The exporter against real SDK servers serving prompts, resources and a resource template with the
# SDKs' high-level APIs and defaults (issue 26): the Python SDK's `MCPServer` (both eras, and with
# `subscriptions=False`), the TypeScript SDK 1.x `McpServer` (`registerPrompt`/`registerResource`
# handles, `remove()`) and 2.x `createMcpHandler` (`handler.notify.*`); a removed prompt and a
# removed resource, announced and silent, judged by each era's contract, by change class, against
# pins (`pin`, `check --pins`, a target's `pins:`) and, through the exporter's proxy, as stale
# `prompts/get` / `resources/read` calls of a real SDK client (.ci/lists_peers_e2e.py).
#
# Usage: .ci/lists_peers_e2e.sh WORKDIR EXPORTER_BIN
# Installs the pinned peers under WORKDIR with .ci/peers/install.sh (skipped when already there).
# Bounded: the install and the run have deadlines.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
log() { printf '[lists_peers %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# ---- Python and TypeScript peers, pinned (the install the other peer runs share)
peer_env=$(timeout 1800 bash "$here/peers/install.sh" "$root")
eval "$peer_env"
log "setup took $(($(date +%s) - started)) s"

# ---- the run (its waits have deadlines; this is the backstop)
run_started=$(date +%s)
timeout -k 10 240 "$PEER_PY" "$here/lists_peers_e2e.py" --work "$root/lists_peers" --bin "$bin" \
  --node "$PEER_NODE" --node-path "$PEER_NODE_PATH"
log "PASS: run took $(($(date +%s) - run_started)) s, $(($(date +%s) - started)) s in all"
