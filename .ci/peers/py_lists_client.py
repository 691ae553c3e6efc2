"""A real MCP client on the official Python SDK (PyPI `mcp` 2.x: `ClientSession` over
`streamable_http_client`) that caches prompts, resources and resource templates, correctly or not.

Why: the proxy of `mcp_exporter` judges a client's `prompts/get` and `resources/read` of an item
the upstream no longer lists as a stale call (docs/proxy.md, "Prompts, resources and resource
templates"). .ci/lists_peers_e2e.py drives it with the SDK's own client against the list peers
(py_lists_server.py, ts_lists_server.mjs; the names of lists_catalog.mjs), not an imitation.

Modes:
  cached  list every page of prompts/list, resources/list and resources/templates/list (3, 3, 1),
          print `ready`; once told (the --go file, written after the server removed
          kb_legacy_digest and kb://articles/retired) call `prompts/get kb_legacy_digest` and
          `resources/read kb://articles/retired` from that cached listing, without re-listing
  relist  list the same way, print `ready`; once told, re-list all three (must be 2, 2, 1, the
          removed two gone) and only then use still-listed items: `prompts/get kb_summarize`,
          `resources/read kb://articles/welcome` and `resources/read kb://drafts/welcome` (a URI
          the listed template produces); all must succeed

Each use is reported as [is_error, JSON-RPC error code or null, first text or the error's
message]; `list_changed` heard (prompts, resources) is counted but never acted on. Eras (--era):
`legacy` (default, `initialize` and a session) or `modern` (2026-07-28, `server/discover`).

Protocol (as py_client.py): prints `ready {json}`, waits (bounded) for the --go file, prints
`result {json}` and exits 0; any failure prints `error ...` and exits 1. Every wait has a deadline.

Usage: python py_lists_client.py URL --name CLIENT_NAME --mode cached|relist --go FILE
                                     [--timeout 30] [--era legacy|modern]
"""

from __future__ import annotations

import argparse
import time

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# The SDK client's shared helpers (this folder is the script's: on sys.path).
from py_client import Failed, expect, run_bounded, say, wait_go

MAX_PAGES = 10
REMOVED_PROMPT, REMOVED_RESOURCE = "kb_legacy_digest", "kb://articles/retired"
KEPT_PROMPT, KEPT_RESOURCE = "kb_summarize", "kb://articles/welcome"
TEMPLATED = "kb://drafts/welcome"  # produced by the listed template kb://drafts/{slug}, never listed


async def walk(session: ClientSession, method: str) -> list[str]:
    """Every page of one list, following nextCursor; the items' keys."""
    call, items, key = {
        "prompts": (session.list_prompts, "prompts", lambda p: p.name),
        "resources": (session.list_resources, "resources", lambda r: str(r.uri)),
        "resource_templates": (session.list_resource_templates, "resource_templates", lambda t: t.uri_template),
    }[method]
    keys: list[str] = []
    cursor = None
    for _ in range(MAX_PAGES):
        result = await call(params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None)
        keys += [key(i) for i in getattr(result, items)]
        cursor = result.next_cursor
        if cursor is None:
            return keys
    raise Failed(f"{method}: more than {MAX_PAGES} pages")


async def walk_all(session: ClientSession) -> dict[str, list[str]]:
    return {l: await walk(session, l) for l in ("prompts", "resources", "resource_templates")}


async def use(coro) -> list:
    """[is_error, code, text] of a prompts/get or resources/read."""
    try:
        result = await coro
    except MCPError as exc:
        return [True, exc.code, exc.message[:200]]
    if isinstance(result, types.GetPromptResult):
        msg = result.messages[0].content if result.messages else None
        return [False, None, (getattr(msg, "text", "") or "")[:200]]
    first = result.contents[0] if result.contents else None
    return [False, None, (getattr(first, "text", "") or "")[:200]]


async def run(args: argparse.Namespace) -> dict:
    deadline = time.monotonic() + args.timeout
    heard = {"prompts": 0, "resources": 0}

    async def on_message(message) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/prompts/list_changed":
            heard["prompts"] += 1
        elif method == "notifications/resources/list_changed":
            heard["resources"] += 1

    out: dict = {"mode": args.mode, "name": args.name}
    async with streamable_http_client(args.url) as (read, write):
        async with ClientSession(read, write, message_handler=on_message, read_timeout_seconds=10,
                                 client_info=types.Implementation(name=args.name, version="1.0.0")) as s:
            if args.era == "modern":
                await s.discover()
            else:
                await s.initialize()
            out["protocol_version"] = s.protocol_version
            before = await walk_all(s)
            out["listed"] = {k: len(v) for k, v in before.items()}
            expect(out["listed"] == {"prompts": 3, "resources": 3, "resource_templates": 1}
                   and REMOVED_PROMPT in before["prompts"] and REMOVED_RESOURCE in before["resources"],
                   f"before the removal: {before}")
            say("ready", **out)
            await wait_go(args.go, deadline)
            if args.mode == "cached":
                out[REMOVED_PROMPT] = await use(s.get_prompt(REMOVED_PROMPT))
                out[REMOVED_RESOURCE] = await use(s.read_resource(REMOVED_RESOURCE))
            else:
                after = await walk_all(s)
                out["relisted"] = {k: len(v) for k, v in after.items()}
                expect(out["relisted"] == {"prompts": 2, "resources": 2, "resource_templates": 1}
                       and REMOVED_PROMPT not in after["prompts"] and REMOVED_RESOURCE not in after["resources"],
                       f"after the removal: {after}")
                out[KEPT_PROMPT] = await use(s.get_prompt(KEPT_PROMPT, {"article": "welcome"}))
                out[KEPT_RESOURCE] = await use(s.read_resource(KEPT_RESOURCE))
                out[TEMPLATED] = await use(s.read_resource(TEMPLATED))
                expect(not any(out[k][0] for k in (KEPT_PROMPT, KEPT_RESOURCE, TEMPLATED)), f"uses after the re-list: {out}")
            out["used_at"] = time.time()
            out["list_changed_heard"] = dict(heard)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--name", required=True, help="clientInfo.name (the proxy's `client` label)")
    ap.add_argument("--mode", required=True, choices=["cached", "relist"])
    ap.add_argument("--go", required=True, help="a file whose appearance means: the items were removed")
    ap.add_argument("--timeout", type=float, default=30.0, help="deadline for the whole run (s)")
    ap.add_argument("--era", choices=["legacy", "modern"], default="legacy")
    run_bounded(run, ap.parse_args())


if __name__ == "__main__":
    main()
