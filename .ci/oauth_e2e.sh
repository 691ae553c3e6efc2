#!/usr/bin/env bash
# The exporter against a real OAuth-protected MCP server whose tokens expire during the run
# (docs/interop.md, "OAuth-protected server in CI"):
#   the authorization server  .ci/oauth/as.mjs   npm oidc-provider (client_credentials,
#                             client_secret_basic + private_key_jwt clients, RFC 8707 resource
#                             indicators, 6 s tokens, introspection)
#   the MCP server            .ci/oauth/rs.py    PyPI mcp (MCPServer with a TokenVerifier that
#                             introspects, AuthSettings: PRM, 401/403 challenges)
# Steps: install (pinned, .ci/peers/install.sh; skipped when present), fresh credentials, start
# both, the plain-client checker (.ci/oauth/check_server_side.py: the server side works), then the
# exporter for 4 token lifetimes (.ci/oauth/exporter_e2e.py: up throughout, zero failures, tokens
# renewed), then `mcp_exporter proxy` with an oauth2 --http-config in front of the same server
# (.ci/oauth/proxy_e2e.py: the catalog up throughout, a client's stale calls counted, its own token
# passed through). The AS and the MCP server listen on different ports, i.e. different origins: the
# exporter's targets name the AS as `oauth2.issuer` (credentials go nowhere else; without it the
# run fails with reason untrusted_authorization_server). The pair alone: .ci/oauth/serve.sh.
#
# Usage: .ci/oauth_e2e.sh WORKDIR EXPORTER_BIN
# Bounded: the install, each step and every wait have deadlines; both servers are ended on exit.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=oauth/lib.sh
. "$here/oauth/lib.sh"
started=$(date +%s)
log() { printf '[oauth_e2e %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }
TTL=6

if ! command -v openssl >/dev/null 2>&1; then
  timeout 600 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends openssl >/dev/null
fi
eval "$(timeout 1800 bash "$here/peers/install.sh" "$root")"
log "setup took $(($(date +%s) - started)) s"

dir="$root/oauth"
rm -rf "$dir"
oauth_credentials "$dir"
trap oauth_stop EXIT
read -r -d '' as_port rs_port < <(free_ports 2) || true
oauth_start "$dir" "$as_port" "$rs_port" "$TTL"
log "authorization server $OAUTH_ISSUER, MCP server $OAUTH_MCP_URL, tokens live $TTL s"

step_started=$(date +%s)
if ! timeout -k 5 120 "$PEER_PY" "$here/oauth/check_server_side.py" --mcp "$OAUTH_MCP_URL" --ttl "$TTL" \
  --basic-id "$OAUTH_BASIC_ID" --basic-secret-file "$OAUTH_BASIC_SECRET_FILE" \
  --jwt-id "$OAUTH_JWT_ID" --jwt-key-file "$OAUTH_JWT_KEY_FILE"; then
  echo "FAIL: the OAuth server side (.ci/oauth: oidc-provider + Python SDK) does not work as a plain client" \
    "expects; the exporter was not run. Logs:" >&2
  for f in "$OAUTH_AS_LOG" "$OAUTH_RS_LOG"; do echo "---- tail $f" >&2; tail -30 "$f" >&2; done
  exit 1
fi
log "PASS server side (plain client): $(($(date +%s) - step_started)) s"

step_started=$(date +%s)
timeout -k 10 240 "$PEER_PY" "$here/oauth/exporter_e2e.py" --work "$dir/exporter" --bin "$bin" \
  --mcp "$OAUTH_MCP_URL" --issuer "$OAUTH_ISSUER" --ttl "$TTL" --basic-id "$OAUTH_BASIC_ID" \
  --basic-secret-file "$OAUTH_BASIC_SECRET_FILE" --jwt-id "$OAUTH_JWT_ID" --jwt-key-file "$OAUTH_JWT_KEY_FILE" \
  --as-log "$OAUTH_AS_LOG" --rs-log "$OAUTH_RS_LOG"
log "PASS exporter across token expiries: $(($(date +%s) - step_started)) s"

step_started=$(date +%s)
timeout -k 10 150 "$PEER_PY" "$here/oauth/proxy_e2e.py" --work "$dir/proxy" --bin "$bin" \
  --mcp "$OAUTH_MCP_URL" --issuer "$OAUTH_ISSUER" --ttl "$TTL" --basic-id "$OAUTH_BASIC_ID" \
  --basic-secret-file "$OAUTH_BASIC_SECRET_FILE" --jwt-id "$OAUTH_JWT_ID" --jwt-key-file "$OAUTH_JWT_KEY_FILE" \
  --as-log "$OAUTH_AS_LOG" --rs-log "$OAUTH_RS_LOG"
log "PASS proxy (catalog with oauth2) across token expiries: $(($(date +%s) - step_started)) s, $(($(date +%s) - started)) s in all"
