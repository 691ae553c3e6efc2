"""An HTTP+SSE (2024-11-05 transport) MCP server on the official Python SDK (`mcp` 2.3).

The deprecated two-endpoint transport: `GET /sse` opens the stream, whose first event is `endpoint`
(data: the POST URL, `/messages/?session_id=<hex>`), and `POST /messages/?session_id=...` carries
client messages (answered 202; replies arrive on the stream as `message` events). Served by the
SDK's `SseServerTransport` with the low-level `Server`, `tools.listChanged` declared. An announced
swap sends `notifications/tools/list_changed` on every open SSE stream. The catalog (14 tools,
`--page-size` per page, the swap) is kb_catalog.py's.

Usage: python py_sse_server.py PORT [--page-size 8] [--swap-after S] [--unannounced]
SSE at http://127.0.0.1:PORT/sse; POST /admin/change[?announce=0] swaps now; GET /admin/state.
"""

import logging

import anyio
from kb_catalog import Catalog, LegacySessions, admin_routes, arguments, serve_http, server_handlers
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route


def main() -> None:
    args = arguments("HTTP+SSE Python SDK peer (mcp 2.3 SseServerTransport)")
    logging.basicConfig(level=logging.WARNING)
    catalog = Catalog(args.page_size)
    streams = LegacySessions()

    def session_id(ctx):  # the stream a POST belongs to
        request = getattr(ctx, "request", None)
        return request.query_params.get("session_id") if request is not None else None

    server = Server("ci-py-sse", version="1.0.0", **server_handlers(catalog, streams, session_id))
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, options)
        return Response()

    app = Starlette(
        routes=[
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
            *admin_routes(catalog, lambda: {"sessions": len(streams.sessions)}),
        ]
    )
    anyio.run(serve_http, app, args.port, catalog, args)


if __name__ == "__main__":
    main()
