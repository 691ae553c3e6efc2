"""The Python SDK's high-level `MCPServer` (PyPI `mcp` 2.3) with its defaults.

A real peer for .ci/default_peers_e2e.py, which asks what the exporter makes of a server run the way
the SDK's documentation shows, with a config of just `url`: `MCPServer(name)`, `@mcp.tool`, and
`mcp.run(transport="streamable-http")` — stateful by default, or `stateless_http=True` with
`--stateless`. No cache hints (so `ttlMs` 0), the default in-memory subscription bus (so
`subscriptions/listen` is served on the 2026-07-28 path).

The catalog is kb_catalog.py's names: 13 `kb_*` tools plus `search_legacy`, and one more tool,
`kb_swap`, the SDK's way to change the list and announce it: it swaps `search_legacy` for
`search_v2` (or back) and calls `ctx.notify_tools_changed()`, which publishes on the subscription
bus (every open listen stream; legacy sessions are not told). `POST /admin/change` (an
`@mcp.custom_route`) swaps silently; `GET /admin/state` shows the list.

Usage: python py_mcpserver_default.py PORT [--stateless]      (MCP at http://127.0.0.1:PORT/mcp)
"""

import argparse
import sys

import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

BASE_TOOLS = [
    "kb_search", "kb_get_article", "kb_list_spaces", "kb_create_article", "kb_update_article",
    "kb_delete_article", "kb_tag_article", "kb_list_tags", "kb_attach_file", "kb_export_space",
    "kb_import_space", "kb_history",
]

mcp = MCPServer("ci-py-mcpserver-default", log_level="WARNING")
state = {"search": "search_legacy", "generation": 0}


def _make(name: str):
    def fn(q: str = "") -> str:
        return f"{name}: {q}"

    fn.__name__ = name
    fn.__doc__ = f"{name} on the knowledge base"
    return fn


@mcp.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False))
def kb_stats() -> str:
    """Article and space counts of the knowledge base."""
    return "ok"


for _name in [*BASE_TOOLS, "search_legacy"]:
    mcp.add_tool(_make(_name))


def swap() -> dict:
    old = state["search"]
    new = "search_v2" if old == "search_legacy" else "search_legacy"
    mcp.remove_tool(old)
    mcp.add_tool(_make(new))
    state.update(search=new, generation=state["generation"] + 1)
    return {"tools": [*BASE_TOOLS, "kb_stats", "kb_swap", new], "generation": state["generation"]}


@mcp.tool()
async def kb_swap(ctx: Context) -> str:
    """Swaps search_legacy and search_v2 and announces it on the subscription bus."""
    answer = swap()
    await ctx.notify_tools_changed()
    print(f"swap (kb_swap, announced): generation {answer['generation']}, {state['search']}", file=sys.stderr, flush=True)
    return f"swapped to {state['search']}"


@mcp.custom_route("/admin/change", methods=["POST"])
async def admin_change(request: Request) -> JSONResponse:
    answer = swap()
    print(f"swap (admin, silent): generation {answer['generation']}, {state['search']}", file=sys.stderr, flush=True)
    return JSONResponse({**answer, "notified": 0})


@mcp.custom_route("/admin/state", methods=["GET"])
async def admin_state(request: Request) -> JSONResponse:
    return JSONResponse({"search": state["search"], "generation": state["generation"]})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--stateless", action="store_true", help="stateless_http=True")
    args = ap.parse_args()
    mcp.run(transport="streamable-http", host="127.0.0.1", port=args.port, stateless_http=args.stateless)
