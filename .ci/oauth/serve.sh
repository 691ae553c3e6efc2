#!/usr/bin/env bash
# The OAuth pair of .ci/oauth alone — oidc-provider as authorization server, the Python SDK as an
# OAuth-protected MCP server — for a person or another test (a Rust-side check) to point a client at.
# Installs the pinned peers under WORKDIR (.ci/peers/install.sh; skipped when there), writes fresh
# client credentials to WORKDIR/oauth-serve/, starts both, and prints on stdout, once both listen:
#
#   OAUTH_ISSUER=http://127.0.0.1:AS_PORT      OAUTH_MCP_URL=http://127.0.0.1:RS_PORT/mcp
#   OAUTH_TTL=...   OAUTH_BASIC_ID / OAUTH_BASIC_SECRET_FILE   OAUTH_JWT_ID / OAUTH_JWT_KEY_FILE
#   OAUTH_AS_LOG / OAUTH_RS_LOG   and a last line `ready`
#
# (shell assignments: `eval` them). Then it runs until SIGINT/SIGTERM or until one of the two
# exits, and ends both either way. Port 0 (the default) picks a free port.
#
# Usage: .ci/oauth/serve.sh WORKDIR [AS_PORT [RS_PORT [TOKEN_TTL_SECONDS]]]   (TTL default 6)
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 4 ] || { echo "usage: $0 WORKDIR [AS_PORT [RS_PORT [TOKEN_TTL_SECONDS]]]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(mkdir -p "$1" && cd "$1" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
read -r -d '' spare_as spare_rs < <(free_ports 2) || true
as_port=${2:-0}
rs_port=${3:-0}
[ "$as_port" != 0 ] || as_port=$spare_as
[ "$rs_port" != 0 ] || rs_port=$spare_rs

eval "$(timeout 1800 bash "$here/../peers/install.sh" "$root")"
dir="$root/oauth-serve"
oauth_credentials "$dir"
trap oauth_stop EXIT
trap 'exit 0' INT TERM
oauth_start "$dir" "$as_port" "$rs_port" "${4:-6}"
oauth_env
echo ready
# Until either server exits (or a signal ends the script through the traps above).
wait -n "${oauth_pids[@]}" || true
echo "serve.sh: a server exited; see $OAUTH_AS_LOG and $OAUTH_RS_LOG" >&2
exit 1
