"""A dual-era MCP server on the official Python SDK (PyPI `mcp` 2.3, low-level `Server`).

A real peer for the 2026-07-28 (modern) era, with the legacy handshake served on the same URL:
- modern: `server/discover`, `tools/list` in pages with `ttlMs`/`cacheScope` (the server's
  `cache_hints`), and `subscriptions/listen` served by the SDK's `ListenHandler` over an
  `InMemorySubscriptionBus`;
- legacy (2025-xx `initialize`): sessions (`Mcp-Session-Id`), `tools.listChanged` declared, the
  GET stream carries `notifications/tools/list_changed`.
An announced swap publishes `ToolsListChanged` on the bus (every open listen stream) and sends
list_changed to every legacy session that has listed or called; an unannounced one sends nothing.
The catalog (14 tools, `--page-size` per page, the swap) is kb_catalog.py's.

Usage: python py_modern_server.py PORT [--page-size 8] [--swap-after S] [--unannounced]
                                       [--ttl-ms 60000] [--cache-scope public|private]
                                       [--max-sessions N]
MCP at http://127.0.0.1:PORT/mcp; POST /admin/change[?announce=0] swaps now; GET /admin/state.
"""

import logging

import anyio
from kb_catalog import Catalog, LegacySessions, admin_routes, arguments, serve_http, server_handlers
from mcp.server.lowlevel import NotificationOptions, Server


class KbServer(Server):
    """Declares tools.listChanged to legacy sessions (the session manager's defaults leave it false;
    for modern requests the SDK derives it from `subscriptions/listen` being served)."""

    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs
        )


def main() -> None:
    args = arguments("dual-era Python SDK peer (mcp 2.3 low-level Server)")
    logging.basicConfig(level=logging.WARNING)
    catalog = Catalog(args.page_size)
    legacy = LegacySessions()

    def session_id(ctx):
        request = getattr(ctx, "request", None)
        return request.headers.get("mcp-session-id") if request is not None else None

    server = KbServer("ci-py-modern", version="1.0.0", **server_handlers(catalog, legacy, session_id, modern=args))
    limits = {"max_sessions": args.max_sessions} if args.max_sessions else {}
    app = server.streamable_http_app(
        host="127.0.0.1",
        custom_starlette_routes=admin_routes(catalog, lambda: {"legacy_sessions": len(legacy.sessions)}),
        **limits,
    )
    anyio.run(serve_http, app, args.port, catalog, args)


if __name__ == "__main__":
    main()
