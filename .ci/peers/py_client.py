"""A real MCP client on the official Python SDK (PyPI `mcp` 2.x: `ClientSession` over
`streamable_http_client`, or `sse_client` with --transport sse), used the way correct and careless
assistants use it.

Why: the proxy of `mcp_exporter proxy` measures what real clients do with the tool list (do they
follow cursors, re-list after list_changed, call tools that are gone). Its end-to-end test
(.ci/proxy_e2e.py) must drive it with the SDK's own client, not an imitation: the handshake, the
GET stream, the session id and the DELETE at the end are the SDK's.

Modes (the server is a kb peer: 14 tools (--tools), 8 per page, a swap of search_legacy for
search_v2):
  correct     list_tools following every nextCursor, call kb_stats; after the swap wait for
              notifications/tools/list_changed, re-list every page, call search_v2 and kb_stats
              (modern era: the SDK's `subscriptions/listen` stream is opened first, with
              tools_list_changed, and the notification awaited there)
  relist      correct with a server that cannot announce: list every page, call kb_stats; once
              told (the --go file) re-list every page, print `relisted {json}` (with `at`, the
              wall-clock time the re-list ended), then call kb_stats only (listed before and after)
  first-page  one list_tools() without a cursor (8 of 14 tools), then call kb_search
  cached      list every page, then after the swap call search_legacy from that cached list
              (list_changed is heard and ignored); `called_at` is when that call returned;
              `search_legacy` is [isError, first text or the JSON-RPC error's message] and
              `search_legacy_code` the JSON-RPC error code (null for a result)
  reconnect   list every page in a first session and end it; after the swap open a new session
              and call kb_stats without listing (a list cached from the earlier session)
  heal        a long-lived correct client (.ci/proxy_heal_e2e.py): list every page, then every
              0.5 s call search_legacy while its latest listing has it, kb_stats otherwise; each
              list_changed (on its GET stream) makes it re-list every page; stops when the --go
              file appears; `result` has every list_changed, re-list and search_legacy call (the
              JSON-RPC error code, if any) with wall-clock times
  ignore      list every page; once told (--go) call search_legacy 3 times, 0.5 s apart, from
              that list (list_changed heard, counted, ignored); `result` as heal's
  expired     list every page (`listed_at` in `ready`: when the walk ended) and call kb_stats; once
              told, call kb_stats again in the same session without listing (`called_at`): a
              listing kept past the server's ttlMs (2026-07-28), or cached until list_changed
              (legacy, its era's contract)

Eras (--era): `legacy` (default) is the `initialize` handshake and a session; `modern` is the
SDK's 2026-07-28 path (`server/discover`, then requests stamped with `_meta`, no session; `ready`
carries the first page's `ttl_ms`).
Transports (--transport): `http` (default, Streamable HTTP) or `sse` (HTTP+SSE, 2024-11-05: URL is
the GET stream's, e.g. http://host/sse; legacy era only).

Protocol with the orchestrator: prints `ready {json}` once its pre-swap part is done, then waits
(bounded) for the file given by --go to exist (written after the swap), then prints
`result {json}` and exits 0; any failure prints `error ...` and exits 1. Every wait has a deadline.

Usage: python py_client.py URL --name CLIENT_NAME --mode MODE --go FILE [--timeout 60]
                                 [--era legacy|modern] [--tools 14] [--transport http|sse]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.client.subscriptions import ToolsListChanged, listen

MAX_PAGES = 10  # a correct client still caps a walk: a server that never ends pagination


def say(kind: str, **data) -> None:
    print(kind, json.dumps(data, sort_keys=True), flush=True)


class Failed(Exception):
    pass


async def wait_go(path: str, deadline: float) -> None:
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise Failed(f"go file {path} did not appear in time")
        await anyio.sleep(0.05)


async def list_tools(session: ClientSession, follow: bool, meta: dict | None = None) -> tuple[list[str], int]:
    """Names and pages: every page when `follow`, else the first page only. Given `meta`, sets
    its `ttl_ms` to the first page's (None when the server sent none)."""
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        result = await session.list_tools(params=params)
        if pages == 0 and meta is not None:
            meta["ttl_ms"] = getattr(result, "ttl_ms", None)
        pages += 1
        names += [t.name for t in result.tools]
        cursor = result.next_cursor
        if not follow or cursor is None:
            return names, pages
        if pages >= MAX_PAGES:
            raise Failed(f"more than {MAX_PAGES} pages")


async def call_coded(session: ClientSession, tool: str) -> tuple[bool, int | None, str]:
    """(is_error, JSON-RPC error code or None, first text or the error's message)."""
    try:
        result = await session.call_tool(tool, {} if tool == "kb_stats" else {"q": "proxy e2e"})
    except MCPError as exc:
        return True, exc.code, exc.message[:200]
    text = next((c.text for c in result.content if getattr(c, "text", None) is not None), "")
    return bool(result.is_error), None, text[:200]


async def heal_loop(c: "Client", s: ClientSession, args: argparse.Namespace, names: list[str],
                    deadline: float) -> dict:
    """Modes heal and ignore (see the module doc): what the client heard, listed and called."""
    out: dict = {"list_changed_at": [], "relists": [], "legacy_calls": [], "kb_stats_calls": 0, "kb_stats_errors": []}
    heard = 0

    def note_changes() -> int:
        new = len(c.changed_at) - heard
        out["list_changed_at"] = list(c.changed_at)
        return new

    async def legacy() -> None:
        is_error, code, text = await call_coded(s, "search_legacy")
        out["legacy_calls"].append([time.time(), is_error, code, text])

    if args.mode == "ignore":
        await wait_go(args.go, deadline)
        for i in range(3):
            if i:
                await anyio.sleep(0.5)
            await legacy()
        note_changes()
        return out
    while not os.path.exists(args.go):
        if time.monotonic() > deadline:
            raise Failed("the go (stop) file did not appear in time")
        if note_changes():
            heard = len(c.changed_at)
            names, pages = await list_tools(s, follow=True)
            out["relists"].append([time.time(), pages, "search_legacy" in names, "search_v2" in names])
        elif "search_legacy" in names:
            await legacy()
        else:
            is_error, code, text = await call_coded(s, "kb_stats")
            out["kb_stats_calls"] += 1
            if is_error or text != "ok":
                out["kb_stats_errors"].append([time.time(), code, text])
        with anyio.move_on_after(0.5):
            await c.wake.wait()
        c.wake = anyio.Event()
    note_changes()
    return out


async def call(session: ClientSession, tool: str) -> tuple[bool, str]:
    """(is_error, first text) of a tools/call; a JSON-RPC error is an error too. kb_stats takes
    no arguments (fastmcp's refuses any); the others a query."""
    try:
        result = await session.call_tool(tool, {} if tool == "kb_stats" else {"q": "proxy e2e"})
    except Exception as exc:  # noqa: BLE001 - the TS peer answers unknown tools with -32602
        return True, f"{type(exc).__name__}: {exc}"[:200]
    text = next((c.text for c in result.content if getattr(c, "text", None) is not None), "")
    return bool(result.is_error), text[:200]


async def handshake(session: ClientSession, era: str) -> str:
    """The era's start: `initialize` (legacy) or `server/discover` (2026-07-28); the version."""
    if era == "modern":
        await session.discover()
        expect(session.protocol_version == "2026-07-28", f"modern era: negotiated {session.protocol_version}")
    else:
        await session.initialize()
    return session.protocol_version


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failed(what)


class Client:
    """One SDK session with a list_changed latch."""

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.info = types.Implementation(name=name, version="1.0.0")
        self.changed = anyio.Event()
        self.changed_at: list[float] = []  # wall-clock time of each list_changed heard
        self.wake = anyio.Event()  # the heal loop's: re-list now

    async def on_message(self, message) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.changed_at.append(time.time())
            self.changed.set()
            self.wake.set()

    def session(self, read, write) -> ClientSession:
        return ClientSession(read, write, message_handler=self.on_message, client_info=self.info,
                             read_timeout_seconds=10)

    async def listen(self, session: ClientSession, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        """2026-07-28: the SDK's `subscriptions/listen` stream (tools_list_changed); started once
        the server acknowledged it; sets the latch on the first ToolsListChanged event and ends."""
        async with listen(session, tools_list_changed=True) as subscription:
            task_status.started()
            async for event in subscription:
                if isinstance(event, ToolsListChanged):
                    self.changed.set()
                    return


def transport(args: argparse.Namespace):
    """The SDK's client transport for --transport."""
    return sse_client(args.url) if args.transport == "sse" else streamable_http_client(args.url)


async def run(args: argparse.Namespace) -> dict:
    deadline = time.monotonic() + args.timeout
    c = Client(args.url, args.name)
    out: dict = {"mode": args.mode, "name": args.name}
    async with transport(args) as (read, write):
        async with c.session(read, write) as s, anyio.create_task_group() as tg:
            out["protocol_version"] = await handshake(s, args.era)
            if args.mode == "first-page":
                names, pages = await list_tools(s, follow=False)
                expect(pages == 1 and len(names) < args.tools, f"first page: {pages} pages, {len(names)} tools")
                out["first_page_tools"] = len(names)
                out["kb_search"] = await call(s, "kb_search")
                say("ready", **out)
                await wait_go(args.go, deadline)
                return out
            if args.mode == "correct" and args.era == "modern":
                await tg.start(c.listen, s)
                out["listening"] = True
            names, pages = await list_tools(s, follow=True, meta=out if args.era == "modern" else None)
            out["listed_at"] = time.time()
            expect(len(names) == args.tools and "search_legacy" in names, f"before the swap: {pages} pages, {names}")
            if args.mode in ("heal", "ignore"):
                out["pages_before"] = pages
                say("ready", **out)
                return {**out, **await heal_loop(c, s, args, names, deadline)}
            out["pages_before"] = pages
            out["kb_stats_before"] = await call(s, "kb_stats")
            expect(out["kb_stats_before"] == (False, "ok"), f"kb_stats: {out['kb_stats_before']}")
            if args.mode == "expired":
                say("ready", **out)
                await wait_go(args.go, deadline)
                out["kb_stats_later"] = await call(s, "kb_stats")
                out["called_at"] = time.time()
                expect(out["kb_stats_later"] == (False, "ok"), f"kb_stats later: {out['kb_stats_later']}")
                return out
            if args.mode == "correct":
                say("ready", **out)
                await wait_go(args.go, deadline)
                with anyio.fail_after(max(1.0, deadline - time.monotonic())):
                    await c.changed.wait()
                names, pages = await list_tools(s, follow=True)
                expect(len(names) == args.tools and "search_v2" in names and "search_legacy" not in names,
                       f"after the swap: {pages} pages, {names}")
                out["pages_after"] = pages
                out["search_v2"] = await call(s, "search_v2")
                out["kb_stats_after"] = await call(s, "kb_stats")
                expect(not out["search_v2"][0] and not out["kb_stats_after"][0], f"calls after the re-list: {out}")
                return out
            if args.mode == "relist":
                say("ready", **out)
                await wait_go(args.go, deadline)
                names, pages = await list_tools(s, follow=True)
                expect(len(names) == args.tools and "search_v2" in names and "search_legacy" not in names,
                       f"after the swap: {pages} pages, {names}")
                out["pages_after"] = pages
                say("relisted", at=time.time(), pages=pages)
                out["kb_stats_after"] = await call(s, "kb_stats")
                expect(out["kb_stats_after"] == (False, "ok"), f"kb_stats after the re-list: {out['kb_stats_after']}")
                return out
            if args.mode == "cached":
                say("ready", **out)
                await wait_go(args.go, deadline)
                is_error, code, text = await call_coded(s, "search_legacy")
                out["search_legacy"], out["search_legacy_code"] = [is_error, text], code
                out["called_at"] = time.time()
                expect(out["search_legacy"][0], f"search_legacy after the swap should fail: {out['search_legacy']}")
                return out
    # reconnect: the first session has ended (DELETE); a new one calls without listing
    say("ready", **out)
    await wait_go(args.go, deadline)
    async with transport(args) as (read, write):
        async with c.session(read, write) as s:
            await handshake(s, args.era)
            out["kb_stats_reconnected"] = await call(s, "kb_stats")
            expect(out["kb_stats_reconnected"] == (False, "ok"), f"kb_stats: {out['kb_stats_reconnected']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--name", required=True, help="clientInfo.name (the proxy's `client` label)")
    ap.add_argument("--mode", required=True,
                    choices=["correct", "relist", "first-page", "cached", "reconnect", "heal", "ignore", "expired"])
    ap.add_argument("--go", required=True, help="a file whose appearance means: the swap happened")
    ap.add_argument("--timeout", type=float, default=60.0, help="deadline for the whole run (s)")
    ap.add_argument("--era", choices=["legacy", "modern"], default="legacy",
                    help="legacy: initialize and a session; modern: server/discover (2026-07-28)")
    ap.add_argument("--tools", type=int, default=14, help="tools the server lists (fastmcp's peer: 15)")
    ap.add_argument("--transport", choices=["http", "sse"], default="http",
                    help="http: Streamable HTTP; sse: HTTP+SSE (2024-11-05), URL is the GET stream's")
    run_bounded(run, ap.parse_args())


def run_bounded(run, args: argparse.Namespace) -> None:
    """`run(args)` within `args.timeout` (and 5 s): its result said as `result`, or any failure
    (the innermost of an exception group) said as `error` with exit 1. Shared by the clients."""

    async def bounded() -> dict:
        with anyio.fail_after(args.timeout + 5):
            return await run(args)

    try:
        out = anyio.run(bounded)
    except BaseException as exc:  # noqa: BLE001 - any failure is reported and exits 1
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        print(f"error {args.name} ({args.mode}): {type(exc).__name__}: {exc}", flush=True)
        sys.exit(1)
    say("result", **out)


if __name__ == "__main__":
    main()
