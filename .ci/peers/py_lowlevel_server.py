"""A paginating MCP server on the official Python SDK (PyPI `mcp` 2.x, low-level `Server`).

A real peer for .ci/sdk_peers_e2e.sh: 14 tools served 5 per page behind opaque cursors,
`tools.listChanged` declared, one read-only tool (`kb_stats`, annotated readOnlyHint: true,
answers "ok") for functional probes. `POST /admin/change` swaps `search_legacy` for `search_v2`
(or back) and sends `notifications/tools/list_changed` to every session that has talked to us;
`POST /admin/change?announce=0` swaps silently (kb_catalog.py's convention), as a server that
cannot announce does. On the 2026-07-28 path (the SDK serves it with these defaults) there is no
session and no `subscriptions/listen`, so `tools.listChanged` is false there and no swap is heard.

Usage: python py_lowlevel_server.py PORT        (listens on 127.0.0.1:PORT, MCP at /mcp)
"""

import base64
import json
import logging
import sys

import mcp_types as types
import uvicorn
from kb_catalog import BASE_TOOLS, Catalog
from mcp.server.lowlevel import NotificationOptions, Server
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PAGE_SIZE = 5
tool = Catalog.tool  # the catalog every Python peer serves (kb_catalog.py)
state = {"generation": 0, "swapped": False}
sessions: dict = {}  # Mcp-Session-Id -> the latest ServerSession of that session: recipients of list_changed

log = logging.getLogger("py_lowlevel_server")


def current_names() -> list[str]:
    return BASE_TOOLS + (["search_v2"] if state["swapped"] else ["search_legacy"])


def encode_cursor(offset: int) -> str:
    raw = json.dumps({"o": offset, "g": state["generation"]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return int(json.loads(raw)["o"])
    except Exception as exc:  # an unknown cursor is the client's mistake: -32602
        raise ValueError(f"unknown cursor {cursor!r}") from exc


def remember(ctx) -> None:
    request = getattr(ctx, "request", None)
    sid = request.headers.get("mcp-session-id") if request is not None else None
    if sid:
        sessions[sid] = ctx.session


async def on_list_tools(ctx, params) -> types.ListToolsResult:
    remember(ctx)
    offset = decode_cursor(params.cursor) if params is not None and params.cursor else 0
    names = current_names()
    page = names[offset : offset + PAGE_SIZE]
    nxt = offset + PAGE_SIZE
    return types.ListToolsResult(
        tools=[tool(n) for n in page], next_cursor=encode_cursor(nxt) if nxt < len(names) else None
    )


async def on_call_tool(ctx, params) -> types.CallToolResult:
    remember(ctx)
    if params.name not in current_names():
        return types.CallToolResult(content=[types.TextContent(text=f"Unknown tool: {params.name}")], is_error=True)
    text = "ok" if params.name == "kb_stats" else f"{params.name} done"
    return types.CallToolResult(content=[types.TextContent(text=text)])


class KbServer(Server):
    """Declares tools.listChanged on every session (the default options leave it false)."""

    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs
        )


server = KbServer("ci-py-lowlevel", version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def admin_change(request: Request) -> JSONResponse:
    state["swapped"] = not state["swapped"]
    state["generation"] += 1
    sent = 0
    announce = request.query_params.get("announce", "1") != "0"
    for sid, session in list(sessions.items()) if announce else []:
        try:
            await session.send_tool_list_changed()
            sent += 1
        except Exception as exc:  # a closed session: forget it
            log.info("dropping session %s: %s", sid, exc)
            sessions.pop(sid, None)
    return JSONResponse({"tools": current_names(), "notified": sent, "generation": state["generation"]})


async def admin_state(request: Request) -> JSONResponse:
    return JSONResponse({"tools": current_names(), "sessions": len(sessions), "generation": state["generation"]})


def main() -> None:
    port = int(sys.argv[1])
    logging.basicConfig(level=logging.INFO)
    app = server.streamable_http_app(
        host="127.0.0.1",
        custom_starlette_routes=[
            Route("/admin/change", admin_change, methods=["POST"]),
            Route("/admin/state", admin_state, methods=["GET"]),
        ],
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
