#!/usr/bin/env bash
# Passive mode end to end (.ci/proxy_e2e.py): the official SDK clients (Python `mcp`
# ClientSession, TypeScript SDK 1.x Client) through the exporter's proxy to a real SDK server
# (Python `mcp` low-level Server, 14 tools 8 per page, a tool swap): correct clients clean, careless
# ones (first page only, cached list, reconnect without re-list) flagged on their own `client`
# label, a hostile client (garbage JSON, 100 MB body, 10,000 sessions, a foreign session id)
# contained, the correct clients passing again after it.
#
# Then servers that CANNOT announce (.ci/proxy_silent_e2e.py): fastmcp 4.2.3 with its defaults
# (`http`; the Python and TypeScript SDK clients, legacy era) and the Python SDK low-level Server
# on its 2026-07-28 path (the Python SDK client, modern era), each swapping search_legacy for search_v2 silently, one proxy in front
# of each with catalog_refresh_interval 10m: a correct client's re-list through the proxy makes the
# catalog re-walk at once (learning from traffic), so a cached client's call of search_legacy 5 s
# later is counted under its own label within 1 s of that call (stale call and the server's own
# unknown-tool answer), while nothing is attributed to the correct client. About 20 s.
#
# Then healing (.ci/proxy_heal_e2e.py): fastmcp with its defaults behind two proxies, one with
# `heal: true` and one without; after a silent swap learned from a correct client's re-list, the
# Python and TypeScript SDK clients calling search_legacy get exactly one list_changed through the
# heal proxy, re-list and stop calling it, a client that ignores it gets the proxy's -32602; through
# the other proxy nothing is heard and the server's own unknown-tool answers come back. About 15 s.
#
# Then every channel and each era's contract (.ci/proxy_channels_e2e.py), with the Python SDK
# clients: HTTP+SSE (`sse_client` to the SDK's SseServerTransport server) judged per `client` label
# (POSTs tied to their session by the message URL, answers read on the GET stream: list_changed
# forwarded and re-listed, first page only, a stale call and the server's unknown-tool answer), and
# 2026-07-28 (list_changed on `subscriptions/listen` re-listed and timed; with ttlMs 0 and
# ttl_grace 1s, a call 3 s after the listing counted in mcp_proxy_expired_listing_calls_total, a
# legacy client's same call not). About 10 s.
#
# Then the TypeScript SDK servers' own unknown-tool answers (.ci/proxy_ts_unknown_e2e.py): the SDK
# 1.32 `McpServer` (legacy era) and the `@modelcontextprotocol/server` 2.4 `McpServer` from
# `createMcpHandler` (2026-07-28), each with its defaults behind its own proxy; a cached Python SDK
# client calls search_legacy after the change: the answer is exactly docs/proxy.md's shape (isError
# `MCP error -32602: Tool search_legacy not found`; JSON-RPC -32602 `Tool search_legacy not found`)
# and mcp_proxy_unknown_tool_answers_total counts it under that client. About 5 s.
#
# Usage: .ci/proxy_e2e.sh WORKDIR EXPORTER_BIN
# Installs the pinned peers under WORKDIR with .ci/peers/install.sh (skipped when already there).
# Bounded: the install and the run have deadlines.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ci_args "$@"
here=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
log() { printf '[proxy_e2e %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

peer_env=$(timeout 1800 bash "$here/peers/install.sh" "$root")
eval "$peer_env"
log "setup took $(($(date +%s) - started)) s"

# One check: its script (SECONDS of budget, killed 10 s after), then a PASS line naming WHAT.
check() {
  local script=$1 seconds=$2 what=$3 t0
  t0=$(date +%s)
  timeout -k 10 "$seconds" "$PEER_PY" "$here/$script.py" --work "$root/$script" --bin "$bin" \
    --node "$PEER_NODE" --node-path "$PEER_NODE_PATH"
  log "PASS $what: run took $(($(date +%s) - t0)) s"
}

check proxy_e2e 420 "proxy e2e"
check proxy_silent_e2e 120 "proxy silent-change e2e"
check proxy_heal_e2e 90 "proxy heal e2e"
check proxy_channels_e2e 90 "proxy channels e2e (HTTP+SSE, 2026-07-28 listen and ttlMs)"
check proxy_ts_unknown_e2e 60 "proxy TypeScript SDK unknown-tool answers e2e"
