# The OAuth pair of .ci/oauth — authorization server (as.mjs, oidc-provider) and MCP resource
# server (rs.py, PyPI mcp) — as shell functions, shared by .ci/oauth/serve.sh (the pair alone, for
# a person or another test) and .ci/oauth_e2e.sh (the pair, the plain checker, the exporter).
# Source it after `eval "$(.ci/peers/install.sh DIR)"` (PEER_PY, PEER_NODE, PEER_NODE_PATH).
#
#   oauth_credentials DIR        fresh client credentials under DIR (see below)
#   oauth_start DIR AS_PORT RS_PORT TTL
#                                starts both in the background (logs DIR/as.log, DIR/rs.log), waits
#                                for each to say it listens (bounded), sets OAUTH_* below
#   oauth_stop                   ends both (by their process ids)
#   oauth_env                    prints the OAUTH_* assignments, one a line
#   free_ports N                 N distinct free loopback TCP ports, one a line
#
# Clients at the AS (fixed ids; secrets and keys new for every DIR set-up):
#   mcp-exporter-basic  client_secret_basic  secret in DIR/basic.secret
#   mcp-exporter-jwt    private_key_jwt RS256, key DIR/jwt.key (PKCS#8 PEM), public half DIR/jwt.pub
#   mcp-rs              the resource server's own, for introspection; secret in DIR/rs.secret

oauth_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
oauth_pids=()

free_ports() { # N: all bound at once, so they differ
  python3 -c '
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in held))' "$1"
}

oauth_credentials() { # DIR
  mkdir -p "$1"
  (
    umask 077
    for f in basic rs; do
      openssl rand -hex 24 >"$1/$f.secret"
    done
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1/jwt.key" 2>/dev/null
    openssl pkey -in "$1/jwt.key" -pubout -out "$1/jwt.pub"
  )
}

oauth_wait_line() { # NAME LOG PID PATTERN SECONDS: until LOG has a line matching PATTERN
  local i
  for i in $(seq 1 $(($5 * 10))); do
    grep -q -- "$4" "$2" 2>/dev/null && return 0
    if ! kill -0 "$3" 2>/dev/null; then
      echo "FAIL: the $1 exited before it listened; $2:" >&2
      tail -30 "$2" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "FAIL: the $1 did not say it listens within $5 s (no '$4' in $2):" >&2
  tail -30 "$2" >&2
  return 1
}

oauth_start() { # DIR AS_PORT RS_PORT TTL
  local dir=$1
  OAUTH_ISSUER="http://127.0.0.1:$2"
  OAUTH_MCP_URL="http://127.0.0.1:$3/mcp"
  OAUTH_TTL=$4
  OAUTH_BASIC_ID=mcp-exporter-basic
  OAUTH_BASIC_SECRET_FILE="$dir/basic.secret"
  OAUTH_JWT_ID=mcp-exporter-jwt
  OAUTH_JWT_KEY_FILE="$dir/jwt.key"
  OAUTH_AS_LOG="$dir/as.log"
  OAUTH_RS_LOG="$dir/rs.log"
  NODE_PATH="$PEER_NODE_PATH" "$PEER_NODE" "$oauth_here/as.mjs" --port "$2" --resource "$OAUTH_MCP_URL" \
    --ttl "$4" --basic-secret-file "$dir/basic.secret" --rs-secret-file "$dir/rs.secret" \
    --jwt-public-key "$dir/jwt.pub" >"$OAUTH_AS_LOG" 2>&1 &
  oauth_pids+=($!)
  oauth_wait_line "authorization server (as.mjs)" "$OAUTH_AS_LOG" "$!" "^AS issuer=" 60 || return 1
  "$PEER_PY" "$oauth_here/rs.py" --port "$3" --issuer "$OAUTH_ISSUER" \
    --rs-secret-file "$dir/rs.secret" >"$OAUTH_RS_LOG" 2>&1 &
  oauth_pids+=($!)
  oauth_wait_line "MCP resource server (rs.py)" "$OAUTH_RS_LOG" "$!" "^RS mcp=" 60 || return 1
}

oauth_stop() {
  local pid
  for pid in "${oauth_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${oauth_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  oauth_pids=()
}

oauth_env() {
  local v
  for v in OAUTH_ISSUER OAUTH_MCP_URL OAUTH_TTL OAUTH_BASIC_ID OAUTH_BASIC_SECRET_FILE OAUTH_JWT_ID \
    OAUTH_JWT_KEY_FILE OAUTH_AS_LOG OAUTH_RS_LOG; do
    printf '%s=%q\n' "$v" "${!v}"
  done
}
