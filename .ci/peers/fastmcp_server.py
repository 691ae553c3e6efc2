"""A paginating MCP server on `fastmcp` (PyPI), a real peer for .ci/sdk_peers_e2e.sh.

14 tools served 5 per page (`list_page_size`), `tools.listChanged` declared (fastmcp always does).
`kb_stats` is annotated readOnlyHint: true and answers "ok". `kb_announce` (also read-only) sends
`notifications/tools/list_changed` inside its own POST response stream, before the result — the
way fastmcp delivers notifications raised during a request — without changing the list: a correct
client counts it, re-lists, and finds nothing changed.

Usage: python fastmcp_server.py PORT            (listens on 127.0.0.1:PORT, MCP at /mcp)
"""

import sys

import mcp_types
from fastmcp import Context, FastMCP

mcp = FastMCP("ci-fastmcp", list_page_size=5)

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False}
WRITES = {"readOnlyHint": False, "destructiveHint": True}


@mcp.tool(annotations=READ_ONLY)
def kb_stats() -> str:
    """Article and space counts of the knowledge base."""
    return "ok"


@mcp.tool(annotations=READ_ONLY)
async def kb_announce(ctx: Context) -> str:
    """Announces a (no-op) tool list change in-band, then answers."""
    await ctx.send_notification(mcp_types.ToolListChangedNotification())
    return "announced"


def _make(name: str):
    def fn(q: str = "") -> str:
        return f"{name}: {q}"

    fn.__name__ = name
    fn.__doc__ = f"{name} on the knowledge base"
    return fn


for _name in [
    "kb_search", "kb_get_article", "kb_list_spaces", "kb_create_article", "kb_update_article",
    "kb_delete_article", "kb_tag_article", "kb_list_tags", "kb_attach_file", "kb_export_space",
    "kb_import_space", "kb_history",
]:
    mcp.tool(annotations=WRITES)(_make(_name))


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False, log_level="warning")
