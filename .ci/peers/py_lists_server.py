"""Prompts, resources and a resource template on the Python SDK's `MCPServer` (PyPI `mcp` 2.3), defaults.

A real peer for .ci/lists_peers_e2e.py (issue 26: every list a client caches). The server is built
the way the SDK's documentation shows: `MCPServer(name)`, `@mcp.tool`, `@mcp.prompt`,
`@mcp.resource` (a fixed URI each, and one URI template), `mcp.run(transport="streamable-http")`; no cache hints
(so `ttlMs` 0 on 2026-07-28 listings), the default in-memory subscription bus (so
`subscriptions/listen` is served and, on 2026-07-28, `prompts.listChanged` and
`resources.listChanged` are declared; the legacy `initialize` declares them false).
`--no-listen` passes `subscriptions=False` (no `subscriptions/listen`: on 2026-07-28 the server
then promises nothing about these lists).

The lists: tool `kb_stats`; prompts `kb_summarize`, `kb_translate`, `kb_legacy_digest`; resources
`kb://spaces/index`, `kb://articles/welcome`, `kb://articles/retired`; template
`kb://drafts/{slug}` (its literal prefix covers none of the resources, so a read of the removed one
is answered not found, not by the template). `POST /admin/remove?announce=1|0` removes the prompt `kb_legacy_digest`
(`mcp.remove_prompt`) and the resource `kb://articles/retired` (MCPServer 2.3 has no
`remove_resource`: the entry is dropped from its resource manager), then, with `announce=1`:
- 2026-07-28 clients: the SDK's own announcement, `Context.notify_prompts_changed()` and
  `notify_resources_changed()` (a publish on the subscription bus: every open listen stream that
  asked for that list);
- 2025-11-25 clients: MCPServer's announcement API reaches no legacy session, so each legacy
  session that has sent a request (remembered by a server middleware, keyed by `Mcp-Session-Id`)
  is sent `ServerSession.send_prompt_list_changed()` and `send_resource_list_changed()` (the
  SDK's session API; on its GET stream).
`announce=0` removes silently. A second call removes nothing. `GET /admin/state` shows the lists.

Usage: python py_lists_server.py PORT [--no-listen]      (MCP at http://127.0.0.1:PORT/mcp)
"""

import argparse
import sys

import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse

REMOVED_PROMPT = "kb_legacy_digest"
REMOVED_RESOURCE = "kb://articles/retired"


class LegacySessions:
    """A server middleware: remembers the session of every legacy request (the recipients of a
    legacy list_changed), keyed by Mcp-Session-Id (the SDK builds a ServerSession per request)."""

    def __init__(self) -> None:
        self.sessions: dict[str, object] = {}

    async def __call__(self, ctx, call_next):
        request = getattr(ctx, "request", None)
        sid = request.headers.get("mcp-session-id") if request is not None else None
        if sid and getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            self.sessions[sid] = ctx.session
        return await call_next(ctx)

    async def announce(self) -> int:
        sent = 0
        for sid, session in list(self.sessions.items()):
            try:
                await session.send_prompt_list_changed()
                await session.send_resource_list_changed()
                sent += 1
            except Exception as exc:  # noqa: BLE001 - a closed session: forget it
                print(f"dropping legacy session {sid}: {exc}", file=sys.stderr, flush=True)
                self.sessions.pop(sid, None)
        return sent


def build(no_listen: bool) -> tuple[MCPServer, InMemorySubscriptionBus, LegacySessions]:
    bus = InMemorySubscriptionBus()  # what MCPServer creates by default, held here to announce on
    legacy = LegacySessions()
    mcp = MCPServer("ci-py-lists", log_level="WARNING", subscriptions=False if no_listen else bus,
                    middleware=[legacy])

    @mcp.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def kb_stats() -> str:
        """Article and space counts of the knowledge base."""
        return "ok"

    @mcp.prompt()
    def kb_summarize(article: str) -> str:
        """Summarize a knowledge-base article."""
        return f"Summarize the article {article}."

    @mcp.prompt()
    def kb_translate(article: str, language: str = "en") -> str:
        """Translate a knowledge-base article."""
        return f"Translate the article {article} into {language}."

    @mcp.prompt()
    def kb_legacy_digest() -> str:
        """The weekly digest of the old knowledge base (to be retired)."""
        return "Write the weekly digest."

    @mcp.resource("kb://spaces/index", mime_type="application/json")
    def kb_index() -> str:
        """Every space of the knowledge base."""
        return '{"spaces": ["eng", "ops"]}'

    @mcp.resource("kb://articles/welcome", mime_type="text/markdown")
    def kb_welcome() -> str:
        """The welcome article."""
        return "# Welcome"

    @mcp.resource(REMOVED_RESOURCE, mime_type="text/markdown")
    def kb_retired() -> str:
        """An article about to be retired."""
        return "# Retired"

    @mcp.resource("kb://drafts/{slug}", mime_type="text/markdown")
    def kb_draft(slug: str) -> str:
        """A draft article by slug."""
        return f"# {slug}"

    return mcp, bus, legacy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--no-listen", action="store_true", help="subscriptions=False: no subscriptions/listen")
    args = ap.parse_args()
    mcp, bus, legacy = build(args.no_listen)

    async def state() -> dict:
        return {"prompts": [p.name for p in await mcp.list_prompts()],
                "resources": [str(r.uri) for r in await mcp.list_resources()],
                "resource_templates": [t.uri_template for t in await mcp.list_resource_templates()],
                "legacy_sessions": len(legacy.sessions)}

    @mcp.custom_route("/admin/remove", methods=["POST"])
    async def admin_remove(request: Request) -> JSONResponse:
        announce = request.query_params.get("announce", "1") != "0"
        removed = []
        if REMOVED_PROMPT in [p.name for p in await mcp.list_prompts()]:
            mcp.remove_prompt(REMOVED_PROMPT)
            removed.append(REMOVED_PROMPT)
        if mcp._resource_manager._resources.pop(REMOVED_RESOURCE, None) is not None:
            removed.append(REMOVED_RESOURCE)
        notified = {"listen_bus": 0, "legacy_sessions": 0}
        if announce and removed:
            ctx = Context(mcp_server=mcp, subscriptions=bus)
            await ctx.notify_prompts_changed()
            await ctx.notify_resources_changed()
            notified = {"listen_bus": 0 if args.no_listen else 1, "legacy_sessions": await legacy.announce()}
        print(f"removed {removed}, announce={announce}, notified {notified}", file=sys.stderr, flush=True)
        return JSONResponse({**await state(), "removed": removed, "announced": announce, "notified": notified})

    @mcp.custom_route("/admin/state", methods=["GET"])
    async def admin_state(request: Request) -> JSONResponse:
        return JSONResponse(await state())

    mcp.run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
