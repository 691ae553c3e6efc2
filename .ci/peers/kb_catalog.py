"""The tool catalog and the swap schedule shared by the Python SDK peers of .ci/peers/.

Why a shared module: the modern (py_modern_server.py), HTTP+SSE (py_sse_server.py) and stdio
(py_stdio_server.py) peers differ only in how the SDK serves and announces; the list they serve,
its pages, its cursors and when it changes must be the same everywhere, so CI can assert one
expectation against every peer.

The catalog is the knowledge base of the legacy peers (py_lowlevel_server.py): 13 `kb_*` tools plus
`search_legacy`, which a swap replaces with `search_v2` (and a second swap puts back). `kb_stats` is
read-only and answers "ok"; the others are annotated destructive. Cursors are opaque (base64 JSON
carrying the offset and the list generation); an undecodable one is -32602 (Invalid params).

The schedule: `--swap-after S` swaps once, S seconds after start; `--unannounced` makes that swap
(and `POST /admin/change` without `?announce=1`) silent. A swap never fails the peer: announcing
goes through the callback the peer registers, and a dead recipient is dropped.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
from collections.abc import Awaitable, Callable

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

BASE_TOOLS = [
    "kb_search", "kb_get_article", "kb_list_spaces", "kb_create_article", "kb_update_article",
    "kb_delete_article", "kb_tag_article", "kb_list_tags", "kb_attach_file", "kb_export_space",
    "kb_import_space", "kb_history", "kb_stats",
]

log = logging.getLogger("kb_catalog")


def arguments(description: str, *, port: bool = True) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    if port:
        parser.add_argument("port", type=int, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--page-size", type=int, default=8, help="tools per tools/list page (default 8: 14 tools = 2 pages)")
    parser.add_argument("--swap-after", type=float, default=None, metavar="S",
                        help="swap search_legacy for search_v2 once, S seconds after start")
    parser.add_argument("--unannounced", action="store_true",
                        help="the timed swap sends no list_changed on any channel")
    parser.add_argument("--ttl-ms", type=int, default=60000, help="modern tools/list and server/discover ttlMs")
    parser.add_argument("--cache-scope", choices=["public", "private"], default="public",
                        help="modern tools/list and server/discover cacheScope")
    parser.add_argument("--max-sessions", type=int, default=None,
                        help="the SDK's cap on open legacy sessions (default: the SDK's, 10,000)")
    return parser.parse_args()


class Catalog:
    def __init__(self, page_size: int) -> None:
        if page_size < 1:
            raise SystemExit("--page-size must be at least 1")
        self.page_size = page_size
        self.swapped = False
        self.generation = 0
        self.announcers: list[Callable[[], Awaitable[int]]] = []

    def names(self) -> list[str]:
        return BASE_TOOLS + (["search_v2"] if self.swapped else ["search_legacy"])

    @staticmethod
    def tool(name: str) -> types.Tool:
        read_only = name == "kb_stats"
        return types.Tool(
            name=name,
            description=f"{name} on the knowledge base",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
            annotations=types.ToolAnnotations(read_only_hint=read_only, destructive_hint=not read_only),
        )

    def _cursor(self, offset: int) -> str:
        raw = json.dumps({"o": offset, "g": self.generation}).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _offset(cursor: str) -> int:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            offset = int(json.loads(raw)["o"])
        except Exception:
            offset = -1
        if offset < 0:
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor!r}")
        return offset

    def page(self, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        offset = self._offset(cursor) if cursor is not None else 0
        names = self.names()
        end = offset + self.page_size
        return types.ListToolsResult(
            tools=[self.tool(n) for n in names[offset:end]],
            next_cursor=self._cursor(end) if end < len(names) else None,
        )

    def call(self, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in self.names():
            return types.CallToolResult(content=[types.TextContent(text=f"Unknown tool: {params.name}")], is_error=True)
        text = "ok" if params.name == "kb_stats" else f"{params.name} done"
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def swap(self, announce: bool) -> int:
        """Toggles search_legacy/search_v2; returns how many recipients were notified."""
        self.swapped = not self.swapped
        self.generation += 1
        notified = 0
        if announce:
            for announcer in self.announcers:
                notified += await announcer()
        print(f"swap: generation {self.generation}, tools {self.names()[-1]}, announced={announce}, "
              f"notified={notified}", file=sys.stderr, flush=True)
        return notified

    async def swap_later(self, seconds: float | None, announce: bool) -> None:
        if seconds is None:
            return
        await anyio.sleep(seconds)
        await self.swap(announce)

    def state(self) -> dict:
        return {"tools": self.names(), "generation": self.generation, "page_size": self.page_size}


class LegacySessions:
    """The legacy-era sessions that have talked to us: the recipients of a legacy list_changed.

    Keyed by an identity the peer picks (the Mcp-Session-Id, or the session object itself).
    """

    def __init__(self) -> None:
        self.sessions: dict[object, object] = {}

    def remember(self, key: object, session: object) -> None:
        if key is not None:
            self.sessions[key] = session

    async def announce(self) -> int:
        sent = 0
        for key, session in list(self.sessions.items()):
            try:
                await session.send_tool_list_changed()
                sent += 1
            except Exception as exc:  # a closed session: forget it
                log.info("dropping session %s: %s", key, exc)
                self.sessions.pop(key, None)
        return sent


def server_handlers(catalog: Catalog, legacy: LegacySessions, key: Callable[[object], object],
                    modern: argparse.Namespace | None = None) -> dict:
    """Keyword arguments for the low-level `Server`: the tools handlers, and, given the parsed flags
    as `modern`, the 2026-07-28 pieces (cache hints; `subscriptions/listen` on an in-memory bus).

    An announced swap notifies every open listen stream and every legacy recipient. `key(ctx)`
    names a legacy request's recipient (the SDK builds a new ServerSession per request, so the
    session object cannot be the key); modern requests are never recipients: they hear changes on
    a listen stream only.
    """
    from mcp.server.caching import CacheHint
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    def remember(ctx) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            legacy.remember(key(ctx), ctx.session)

    async def on_list_tools(ctx, params):
        remember(ctx)
        return catalog.page(params)

    async def on_call_tool(ctx, params):
        remember(ctx)
        return catalog.call(params)

    handlers: dict = {"on_list_tools": on_list_tools, "on_call_tool": on_call_tool}
    if modern is not None:
        bus = InMemorySubscriptionBus()

        async def announce_modern() -> int:
            await bus.publish(ToolsListChanged())
            return 1

        catalog.announcers.append(announce_modern)
        hint = CacheHint(ttl_ms=modern.ttl_ms, scope=modern.cache_scope)
        handlers["cache_hints"] = {"tools/list": hint, "server/discover": hint}
        handlers["on_subscriptions_listen"] = ListenHandler(bus)
    catalog.announcers.append(legacy.announce)
    return handlers


def admin_routes(catalog: Catalog, extra_state: Callable[[], dict] | None = None) -> list:
    """`POST /admin/change[?announce=0|1]` (default: announce) and `GET /admin/state`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def change(request: Request) -> JSONResponse:
        announce = request.query_params.get("announce", "1") != "0"
        notified = await catalog.swap(announce)
        return JSONResponse({**catalog.state(), "notified": notified})

    async def state(request: Request) -> JSONResponse:
        return JSONResponse({**catalog.state(), **(extra_state() if extra_state else {})})

    return [Route("/admin/change", change, methods=["POST"]), Route("/admin/state", state, methods=["GET"])]


async def serve_http(app, port: int, catalog: Catalog, args: argparse.Namespace) -> None:
    """Runs uvicorn on 127.0.0.1:PORT next to the timed swap, in one task group."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(catalog.swap_later, args.swap_after, not args.unannounced)
        await server.serve()
        tg.cancel_scope.cancel()
