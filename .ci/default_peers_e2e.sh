#!/usr/bin/env bash
# The exporter and `mcp_exporter check` against real SDK servers run with their DEFAULTS (issue 21:
# verdicts by each era's contract): fastmcp `mcp.run(transport="http")`, rmcp `#[tool_handler]`
# (examples/rmcp_default_server.rs), the Python SDK's `MCPServer` stateful and stateless, the
# TypeScript SDK 1.x `McpServer` (a two-step change) and 2.x `createMcpHandler`, with a real
# Prometheus evaluating the stale and cannot-announce alert expressions (.ci/default_peers_e2e.py).
#
# Usage: .ci/default_peers_e2e.sh WORKDIR EXPORTER_BIN
# Installs the pinned peers under WORKDIR with .ci/peers/install.sh (skipped when already there),
# Debian `prometheus` if missing, and builds the rmcp peer (`cargo build --example
# rmcp_default_server`, next to EXPORTER_BIN: a no-op after `cargo test`). RMCP_DEFAULT_SERVER=PATH
# uses an rmcp peer built elsewhere instead. Bounded: each install and the run have deadlines.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
log() { printf '[default_peers %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# ---- Python and TypeScript peers, pinned (the install the other peer runs share)
peer_env=$(timeout 1800 bash "$here/peers/install.sh" "$root")
eval "$peer_env"

# ---- a real Prometheus evaluates the alert expressions
if ! command -v prometheus >/dev/null 2>&1; then
  timeout 600 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends prometheus >/dev/null
fi

# ---- the rmcp peer: an example of this crate, built into the exporter's target folder
rmcp=${RMCP_DEFAULT_SERVER:-$(dirname "$bin")/examples/rmcp_default_server}
if [ -z "${RMCP_DEFAULT_SERVER:-}" ]; then
  target_dir=$(cd "$(dirname "$bin")/.." && pwd)
  (cd "$here/.." && CARGO_TARGET_DIR="$target_dir" timeout 1800 cargo build --quiet --example rmcp_default_server)
fi
[ -x "$rmcp" ] || { echo "rmcp peer not built: $rmcp" >&2; exit 2; }
log "setup took $(($(date +%s) - started)) s"

# ---- the run (its waits have deadlines; this is the backstop)
run_started=$(date +%s)
timeout -k 10 300 "$PEER_PY" "$here/default_peers_e2e.py" --work "$root/default_peers" --bin "$bin" \
  --node "$PEER_NODE" --node-path "$PEER_NODE_PATH" --rmcp "$rmcp"
log "PASS: run took $(($(date +%s) - run_started)) s, $(($(date +%s) - started)) s in all"
