"""`fastmcp` 4.2 with its defaults: `mcp.run(transport="http")`, no paging, no cache options.

A real peer for .ci/default_peers_e2e.py, which asks what the exporter makes of a server run the way
its documentation shows, with a config of just `url`. Nothing here is tuned for the exporter.

The catalog is kb_catalog.py's names: 13 `kb_*` tools plus `search_legacy`, and one more tool,
`kb_swap`, which is how this peer changes its list the fastmcp way: it swaps `search_legacy` for
`search_v2` (or back) and calls `ctx.send_notification(ToolListChangedNotification())`. fastmcp
relates that notification to the in-flight request, so it rides the answer to that `tools/call`
(to the caller of `kb_swap`, nobody else). `POST /admin/change` (an `@mcp.custom_route`) swaps with
no notification at all; `GET /admin/state` shows the list.

Usage: python fastmcp_default_server.py PORT      (MCP at http://127.0.0.1:PORT/mcp)
"""

import sys

import mcp_types
from fastmcp import Context, FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse

BASE_TOOLS = [
    "kb_search", "kb_get_article", "kb_list_spaces", "kb_create_article", "kb_update_article",
    "kb_delete_article", "kb_tag_article", "kb_list_tags", "kb_attach_file", "kb_export_space",
    "kb_import_space", "kb_history",
]

mcp = FastMCP("ci-fastmcp-default")
state = {"search": "search_legacy", "generation": 0}


def _make(name: str):
    def fn(q: str = "") -> str:
        return f"{name}: {q}"

    fn.__name__ = name
    fn.__doc__ = f"{name} on the knowledge base"
    return fn


@mcp.tool(annotations={"readOnlyHint": True, "destructiveHint": False})
def kb_stats() -> str:
    """Article and space counts of the knowledge base."""
    return "ok"


for _name in [*BASE_TOOLS, "search_legacy"]:
    mcp.tool(_make(_name))


def swap() -> dict:
    old = state["search"]
    new = "search_v2" if old == "search_legacy" else "search_legacy"
    mcp.local_provider.remove_tool(old)  # FastMCP 4 removes through its provider
    mcp.tool(_make(new))
    state.update(search=new, generation=state["generation"] + 1)
    return {"tools": [*BASE_TOOLS, "kb_stats", "kb_swap", new], "generation": state["generation"]}


@mcp.tool
async def kb_swap(ctx: Context) -> str:
    """Swaps search_legacy and search_v2, and tells the caller (list_changed on this call's stream)."""
    answer = swap()
    await ctx.send_notification(mcp_types.ToolListChangedNotification())
    print(f"swap (kb_swap, announced in-band): generation {answer['generation']}, {state['search']}",
          file=sys.stderr, flush=True)
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
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False, log_level="warning")
