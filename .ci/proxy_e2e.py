"""Passive mode end to end: real SDK clients through `mcp_exporter`'s proxy to a real SDK server.

Run by .ci/proxy_e2e.sh (which installs the peers) with the venv's python:

    python proxy_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

1. starts the dual-era Python SDK peer (.ci/peers/py_modern_server.py: 14 tools, 8 per page, a swap
   of search_legacy for search_v2 announced with notifications/tools/list_changed) and the exporter
   with one proxy `kb` in front of it (`proxies:` in its config; short cursor/re-list graces, room
   for 5,000 client sessions), and waits for the proxy's catalog walk (upstream up, 14 tools);
2. runs the official SDK clients through the proxy (.ci/peers/py_client.py: Python `mcp`
   ClientSession; .ci/peers/ts_client.mjs: TypeScript SDK 1.x Client), each with its own
   clientInfo name, in four modes: correct, first-page, cached, reconnect; swaps the tool list at
   the server once every client is ready; lets the correct clients re-list, then the careless
   ones act on their stale lists;
3. asserts on /metrics, per `client` label: the correct clients' series are clean (every cursor
   followed, list_changed forwarded and re-listed, no stale call, no first-page-only session, no
   missing re-list); the first-page clients show a first-page-only session, the cached clients a
   stale-tool call on search_legacy (and the server's own unknown-tool answer to it, counted too),
   the reconnecting clients a session without re-list
   (after="reconnect") — each attributed to its own client and to no other;
4. a hostile client: garbage JSON (400, JSON-RPC parse error), a 100 MB body (413 before it is
   read), a session id it does not own (404), 10,000 sessions (the tracked sessions stay within
   max_sessions, the overflow counted) — each counted under its rejection reason;
5. the correct clients once more, after the hostile one: they pass and their series stay clean.

Every wait has a deadline; every child (server, exporter, clients) is killed on every exit; on
failure the logs are printed.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import sdk_peers_e2e as base
from sdk_peers_e2e import Failure, log

base.TAG = "proxy"
PEERS = base.PEERS
PROXY = "kb"
MAX_SESSIONS = 5000
HOSTILE_SESSIONS = 10_000
UPSTREAM_MAX_SESSIONS = 7_000  # over MAX_SESSIONS, under HOSTILE_SESSIONS
HOSTILE_BODY = 100 * 1024 * 1024
GRACE_S = 2  # cursor_grace and relist_grace in this run's proxy
CLIENT_TIMEOUT = 60  # each client's own deadline (s)
MODES = ["correct", "first-page", "cached", "reconnect"]
SDKS = ["py", "ts"]


class Metrics:
    """One scrape of /metrics, queried by family and labels (the `client` label matched exactly)."""

    def __init__(self, base_url: str):
        self.samples = base.parse_metrics(base.http("GET", f"{base_url}/metrics").decode())

    def sum(self, name: str, **labels) -> float:
        return sum(v for n, ls, v in self.samples
                   if n == name and all(ls.get(k) == str(want) for k, want in labels.items()))

    def has(self, name: str) -> bool:
        return any(n == name for n, _, _ in self.samples)

    def clients(self, name: str) -> set[str]:
        return {ls["client"] for n, ls, v in self.samples if n == name and "client" in ls and v > 0}


def poll(what: str, seconds: float, check) -> None:
    """Polls check() (a list of problems) until it is empty; fails with the last problems."""
    deadline = time.monotonic() + seconds
    problems = ["never polled"]
    while time.monotonic() < deadline:
        for name, proc, _path in base.CHILDREN:
            if proc.poll() is not None and name in ("upstream", "exporter"):
                raise Failure(f"{name} exited with {proc.returncode} while waiting for: {what}")
        try:
            problems = check()
        except (OSError, ValueError, http.client.HTTPException) as exc:
            problems = [f"not answering: {exc}"]
        if not problems:
            log(f"OK: {what}")
            return
        time.sleep(0.3)
    raise Failure(f"within {seconds:.0f} s, not {what}:\n  " + "\n  ".join(problems[:40]))


class Clients:
    """SDK client processes of one round: started together, released by go files, read from logs."""

    def __init__(self, args, work: Path, url: str, modes: list[str], tag: str):
        self.work = work
        self.procs: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
        for sdk in SDKS:
            for mode in modes:
                name = f"{sdk}-{mode}"
                go = work / f"go-{tag}-{name}"
                go.unlink(missing_ok=True)
                script = "py_client.py" if sdk == "py" else "ts_client.mjs"
                exe = sys.executable if sdk == "py" else args.node
                argv = [exe, str(PEERS / script), url, "--name", name, "--mode", mode, "--go", str(go),
                        "--timeout", str(CLIENT_TIMEOUT)]
                proc = base.start(f"client-{tag}-{name}", argv, work, env={"NODE_PATH": args.node_path})
                self.procs[name] = (proc, work / f"client-{tag}-{name}.log", go)

    def lines(self, name: str, kind: str) -> list[str]:
        text = self.procs[name][1].read_text(errors="replace")
        return [line[len(kind) + 1:] for line in text.splitlines() if line.startswith(kind + " ")]

    def wait(self, kind: str, names: list[str], seconds: float) -> dict[str, dict]:
        """Waits until each named client printed `kind {json}`; an early exit or `error` fails."""
        deadline = time.monotonic() + seconds
        got: dict[str, dict] = {}
        while time.monotonic() < deadline:
            for name in names:
                if name in got:
                    continue
                proc, path, _ = self.procs[name]
                found = self.lines(name, kind)
                if found:
                    got[name] = json.loads(found[-1])
                    continue
                if self.lines(name, "error") or (proc.poll() not in (None, 0)):
                    raise Failure(f"client {name} failed:\n{path.read_text(errors='replace')[-3000:]}")
            if len(got) == len(names):
                return got
            time.sleep(0.1)
        raise Failure(f"clients without `{kind}` within {seconds:.0f} s: {sorted(set(names) - set(got))}")

    def go(self, names: list[str]) -> None:
        for name in names:
            self.procs[name][2].write_text("go\n")

    def exited(self, names: list[str], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for name in names:
            proc, path, _ = self.procs[name]
            try:
                rc = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise Failure(f"client {name} did not exit within {seconds:.0f} s") from None
            if rc != 0:
                raise Failure(f"client {name} exited {rc}:\n{path.read_text(errors='replace')[-3000:]}")


def swap(upstream: str, want: str) -> None:
    answer = json.loads(base.http("POST", upstream.replace("/mcp", "/admin/change")))
    if want not in answer["tools"]:
        raise Failure(f"/admin/change did not swap in {want}: {answer}")
    log(f"server swapped its tools: now {want}, notified {answer['notified']} session(s)")


def catalog_walks(base_url: str) -> int:
    """Walks of the upstream by the proxy's own catalog so far (/proxy.json)."""
    for p in json.loads(base.http("GET", f"{base_url}/proxy.json")):
        if p["name"] == PROXY:
            return int(p["catalog_walks"])
    raise Failure(f"/proxy.json has no proxy {PROXY}")


def catalog_caught_up(base_url: str, walks_at_swap: int) -> list[str]:
    """Problems until a walk that began after the swap has ended: the walk running at the swap
    may have read the old list, the one after it cannot have."""
    now = catalog_walks(base_url)
    return [] if now >= walks_at_swap + 2 else [f"catalog walks {now}, waiting for {walks_at_swap + 2}"]


def round_of(args, work: Path, proxy_url: str, upstream: str, base_url: str, modes: list[str], tag: str,
             before: str, after: str) -> dict[str, dict]:
    """One round: every SDK in every mode lists, the server swaps `before` -> `after`, the correct
    clients re-list first, then (once the proxy's catalog has the swap) the careless ones act."""
    clients = Clients(args, work, proxy_url, modes, tag)
    names = list(clients.procs)
    clients.wait("ready", names, 60)
    log(f"{tag}: {len(names)} clients ready: {', '.join(names)}")
    walks = catalog_walks(base_url)
    swap(upstream, after)
    correct = [n for n in names if n.endswith("-correct")]
    careless = [n for n in names if n not in correct]
    clients.go(correct)
    results = clients.wait("result", correct, 40)
    poll(f"the proxy's catalog walked the upstream since the swap ({before} -> {after})", 30,
         lambda: catalog_caught_up(base_url, walks))
    clients.go(careless)
    results.update(clients.wait("result", careless, 40))
    clients.exited(names, 20)
    for name, r in sorted(results.items()):
        log(f"  {name}: {r}")
    return results


def clean(m: Metrics, client: str, rounds: int) -> list[str]:
    """What a correct client's series must show after `rounds` rounds."""
    bad = []

    def want(what, got, ok):
        if not ok(got):
            bad.append(f"{client}: {what} = {got}")

    lab = dict(proxy=PROXY, client=client)
    issued = m.sum("mcp_proxy_cursors_issued_total", **lab)
    want("cursors_issued_total (>= 2 per round)", issued, lambda v: v >= 2 * rounds)
    want("cursors_followed_total (== issued)", m.sum("mcp_proxy_cursors_followed_total", **lab), lambda v: v == issued)
    want("tools_list_requests_total{cursor=true}", m.sum("mcp_proxy_tools_list_requests_total", cursor="true", **lab),
         lambda v: v >= 2 * rounds)
    want("list_changed_forwarded_total", m.sum("mcp_proxy_list_changed_forwarded_total", **lab), lambda v: v >= rounds)
    want("sessions_started_total", m.sum("mcp_proxy_sessions_started_total", **lab), lambda v: v >= rounds)
    for zero in ("mcp_proxy_first_page_only_sessions_total", "mcp_proxy_cursor_errors_total",
                 "mcp_proxy_stale_tool_calls_total", "mcp_proxy_stale_schema_calls_total",
                 "mcp_proxy_sessions_without_relist_total", "mcp_proxy_unknown_tool_answers_total"):
        want(zero, m.sum(zero, **lab), lambda v: v == 0)
    return bad


def careless(m: Metrics, sdk: str) -> list[str]:
    bad = []

    def want(what, got, ok):
        if not ok(got):
            bad.append(f"{what} = {got}")

    fp, cached, rec = f"{sdk}-first-page", f"{sdk}-cached", f"{sdk}-reconnect"
    want(f"first_page_only_sessions_total{{client={fp}}}",
         m.sum("mcp_proxy_first_page_only_sessions_total", proxy=PROXY, client=fp), lambda v: v == 1)
    want(f"cursors_followed_total{{client={fp}}}",
         m.sum("mcp_proxy_cursors_followed_total", proxy=PROXY, client=fp), lambda v: v == 0)
    want(f"stale_tool_calls_total{{client={cached},tool=search_legacy}}",
         m.sum("mcp_proxy_stale_tool_calls_total", proxy=PROXY, client=cached, tool="search_legacy"),
         lambda v: v == 1)
    # The server's own word on that call: the Python SDK's isError "Unknown tool: search_legacy".
    want(f"unknown_tool_answers_total{{client={cached},tool=search_legacy}}",
         m.sum("mcp_proxy_unknown_tool_answers_total", proxy=PROXY, client=cached, tool="search_legacy"),
         lambda v: v == 1)
    want(f"sessions_without_relist_total{{client={rec},after=reconnect}}",
         m.sum("mcp_proxy_sessions_without_relist_total", proxy=PROXY, client=rec, after="reconnect"),
         lambda v: v >= 1)
    for c in (cached, rec):
        want(f"first_page_only_sessions_total{{client={c}}}",
             m.sum("mcp_proxy_first_page_only_sessions_total", proxy=PROXY, client=c), lambda v: v == 0)
    for c in (fp, rec):
        want(f"stale_tool_calls_total{{client={c}}}",
             m.sum("mcp_proxy_stale_tool_calls_total", proxy=PROXY, client=c), lambda v: v == 0)
    return bad


def attribution(m: Metrics) -> list[str]:
    """Each careless signal names only the clients that earned it."""
    bad = []
    expected = {
        "mcp_proxy_first_page_only_sessions_total": {f"{s}-first-page" for s in SDKS},
        "mcp_proxy_stale_tool_calls_total": {f"{s}-cached" for s in SDKS},
        "mcp_proxy_unknown_tool_answers_total": {f"{s}-cached" for s in SDKS},
    }
    for family, want in expected.items():
        got = m.clients(family)
        if got != want:
            bad.append(f"{family}: clients {sorted(got)}, want {sorted(want)}")
    reconnect = {ls["client"] for n, ls, v in m.samples
                 if n == "mcp_proxy_sessions_without_relist_total" and ls.get("after") == "reconnect" and v > 0}
    if reconnect != {f"{s}-reconnect" for s in SDKS}:
        bad.append(f"sessions_without_relist_total{{after=reconnect}}: clients {sorted(reconnect)}")
    return bad


# ---- the hostile client: raw HTTP, as nobody's SDK would send it

def post(port: int, path: str, body: bytes, headers: dict | None = None, timeout: float = 10.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body, {"Content-Type": "application/json",
                                       "Accept": "application/json, text/event-stream", **(headers or {})})
        r = c.getresponse()
        return r.status, r.read(64 * 1024), r.getheader("mcp-session-id")
    finally:
        c.close()


def initialize_body(name: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}}}).encode()


def huge_post(port: int, path: str, size: int) -> tuple[int | None, str]:
    """Sends `size` bytes of body with that Content-Length; the proxy may answer (413) and close
    before it is all sent. Returns (status or None, what happened)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    sent = 0
    try:
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                   f"Accept: application/json, text/event-stream\r\nContent-Length: {size}\r\n\r\n").encode())
        chunk = b"[" + b" " * (1024 * 1024 - 1)
        try:
            while sent < size:
                n = min(len(chunk), size - sent)
                s.sendall(chunk[:n])
                sent += n
        except OSError as exc:  # the proxy closed early: read its answer if it sent one
            how = f"closed by the proxy after {sent >> 20} MiB ({type(exc).__name__})"
        else:
            how = f"all {sent >> 20} MiB sent"
        s.settimeout(20)
        data = b""
        try:
            while b"\r\n" not in data and len(data) < 4096:
                got = s.recv(4096)
                if not got:
                    break
                data += got
        except OSError:
            pass
        line = data.split(b"\r\n", 1)[0].decode(errors="replace")
        status = int(line.split()[1]) if line.startswith("HTTP/1.") and len(line.split()) > 1 else None
        return status, how
    finally:
        s.close()


def hostile(port: int, path: str, base_url: str) -> None:
    m0 = Metrics(base_url)

    def rejected(m, reason):
        return m.sum("mcp_proxy_rejected_requests_total", proxy=PROXY, reason=reason)

    # garbage JSON, in a fresh session and without one
    status, body, _ = post(port, path, b"{this is not json")
    if status != 400 or b"-32700" not in body:
        raise Failure(f"garbage JSON: HTTP {status} {body[:200]!r}, want 400 with a -32700 parse error")
    log(f"hostile: garbage JSON -> HTTP {status} {body[:120]!r}")
    # a 100 MB body
    status, how = huge_post(port, path, HOSTILE_BODY)
    if status != 413:
        raise Failure(f"100 MB body: HTTP {status} ({how}), want 413")
    log(f"hostile: 100 MB body -> HTTP {status}, {how}")
    # a session id it does not own
    sid = str(uuid.uuid4())
    status, body, _ = post(port, path, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode(),
                           {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    if status != 404:
        raise Failure(f"a session id it does not own: HTTP {status} {body[:200]!r}, want 404")
    log(f"hostile: foreign session id -> HTTP {status}")
    poll("invalid_json, body_too_large and unknown_session counted", 10, lambda: [
        f"rejected {{reason={r}}} still {rejected(Metrics(base_url), r)}" for r in
        ("invalid_json", "body_too_large", "unknown_session")
        if rejected(Metrics(base_url), r) <= rejected(m0, r)])

    # 10,000 sessions
    t0 = time.monotonic()
    body = initialize_body("hostile")

    def burst(n: int) -> tuple[int, dict]:
        ok, other = 0, {}
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            for _ in range(n):
                c.request("POST", path, body, {"Content-Type": "application/json",
                                               "Accept": "application/json, text/event-stream"})
                r = c.getresponse()
                r.read()
                if r.status == 200 and r.getheader("mcp-session-id"):
                    ok += 1
                else:
                    other[r.status] = other.get(r.status, 0) + 1
        finally:
            c.close()
        return ok, other

    workers = 8
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        parts = list(ex.map(burst, [HOSTILE_SESSIONS // workers] * workers, timeout=240))
    opened = sum(p[0] for p in parts)
    others: dict = {}
    for _, o in parts:
        for k, v in o.items():
            others[k] = others.get(k, 0) + v
    log(f"hostile: {opened} of {HOSTILE_SESSIONS} sessions opened in {time.monotonic() - t0:.1f} s, other answers {others}")
    if opened != HOSTILE_SESSIONS:
        raise Failure(f"hostile: {opened} of {HOSTILE_SESSIONS} sessions opened (other answers {others}): the proxy "
                      f"did not end the sessions it dropped, so the server's cap ({UPSTREAM_MAX_SESSIONS}) filled up")

    def bounded() -> list[str]:
        m = Metrics(base_url)
        tracked = m.sum("mcp_proxy_sessions", proxy=PROXY)
        overflow = rejected(m, "session_limit") + m.sum("mcp_proxy_sessions_ended_total", proxy=PROXY, reason="evicted")
        bad = []
        if tracked > MAX_SESSIONS:
            bad.append(f"mcp_proxy_sessions (sum) = {tracked} > max_sessions {MAX_SESSIONS}")
        if overflow < 1:
            bad.append("no session_limit rejection or eviction counted after 10,000 sessions")
        if m.sum("mcp_proxy_upstream_up", proxy=PROXY) != 1:
            bad.append("upstream_up != 1")
        return bad

    poll(f"tracked sessions within max_sessions ({MAX_SESSIONS}), the overflow counted", 30, bounded)


def main() -> int:
    args = base.arguments()
    work: Path = args.work
    py = sys.executable
    ports = {"upstream": base.free_port(), "proxy": base.free_port(), "exporter": base.free_port()}
    upstream = f"http://127.0.0.1:{ports['upstream']}/mcp"
    proxy_url = f"http://127.0.0.1:{ports['proxy']}/mcp"
    base_url = f"http://127.0.0.1:{ports['exporter']}"

    # The server's session cap sits between the proxy's max_sessions and the hostile client's
    # sessions: the proxy ends at the upstream every session it drops from tracking, so the
    # hostile client never holds more than max_sessions there and every one of its sessions
    # opens (without that, sessions past the cap would be refused and the correct clients
    # after it locked out).
    srv = base.start("upstream", [py, str(PEERS / "py_modern_server.py"), str(ports["upstream"]), "--page-size", "8",
                                  "--max-sessions", str(UPSTREAM_MAX_SESSIONS)], work)
    base.wait_port("upstream", ports["upstream"], srv, 60)

    config = work / "exporter.yml"
    config.write_text(f"""\
proxies:
  - name: {PROXY}
    listen: 127.0.0.1:{ports['proxy']}
    upstream: {upstream}
    client_label: clientInfo
    max_clients: 20
    max_sessions: {MAX_SESSIONS}
    session_idle_timeout: 10m
    cursor_grace: {GRACE_S}s
    relist_grace: {GRACE_S}s
    catalog_refresh_interval: 5s
    max_request_bytes: 4MiB
""")
    r = subprocess.run([args.bin, "--config.check", f"--config.file={config}"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    exporter = base.start("exporter", [args.bin, f"--config.file={config}",
                                       f"--web.listen-address=127.0.0.1:{ports['exporter']}"], work)
    base.wait_port("exporter", ports["exporter"], exporter, 30)
    base.wait_port("proxy", ports["proxy"], exporter, 30)

    def catalog_ready() -> list[str]:
        m = Metrics(base_url)
        bad = []
        if m.sum("mcp_proxy_upstream_up", proxy=PROXY) != 1:
            bad.append("mcp_proxy_upstream_up != 1")
        if m.sum("mcp_proxy_upstream_tools", proxy=PROXY) != 14:
            bad.append(f"mcp_proxy_upstream_tools = {m.sum('mcp_proxy_upstream_tools', proxy=PROXY)}, want 14")
        for family in ("mcp_proxy_rejected_requests_total", "mcp_proxy_sessions_ended_total"):
            if not m.has(family):
                bad.append(f"{family} not exposed at 0 from the start")
        return bad

    poll("the proxy walked the upstream: upstream up, 14 tools", 60, catalog_ready)

    # ---- round 1: every SDK in every mode
    round_of(args, work, proxy_url, upstream, base_url, MODES, "r1", "search_legacy", "search_v2")

    def after_round1() -> list[str]:
        m = Metrics(base_url)
        bad = [p for s in SDKS for p in clean(m, f"{s}-correct", 1)]
        bad += [p for s in SDKS for p in careless(m, s)]
        return bad + attribution(m)

    poll("correct clients clean; first-page, cached and reconnect flagged on their own client label",
         GRACE_S + 20, after_round1)
    m = Metrics(base_url)
    lag = m.sum("mcp_proxy_relist_lag_seconds_count", proxy=PROXY)
    age = m.sum("mcp_proxy_cursor_age_seconds_count", proxy=PROXY)
    if lag < 2 or age < 4:
        raise Failure(f"relist lag observations {lag} (want >= 2), cursor age observations {age} (want >= 4)")
    log(f"re-list lag: {lag:.0f} observations, {m.sum('mcp_proxy_relist_lag_seconds_sum', proxy=PROXY):.3f} s in "
        f"all; cursor age: {age:.0f} observations")

    # ---- the hostile client, then the correct clients again (the server swaps back first)
    hostile(ports["proxy"], "/mcp", base_url)
    walks = catalog_walks(base_url)
    swap(upstream, "search_legacy")
    poll("the proxy's catalog walked the upstream since the swap back", 30, lambda: catalog_caught_up(base_url, walks))
    round_of(args, work, proxy_url, upstream, base_url, ["correct"], "r2", "search_legacy", "search_v2")
    poll("the correct clients are still clean after the hostile client", GRACE_S + 20,
         lambda: [p for s in SDKS for p in clean(Metrics(base_url), f"{s}-correct", 2)])
    with urllib.request.urlopen(f"{base_url}/proxy", timeout=10) as page:
        if page.status != 200:
            raise Failure(f"/proxy answered {page.status}")
    log("PASS: correct SDK clients clean through the proxy, careless ones attributed, hostile one contained")
    return 0


if __name__ == "__main__":
    base.run(main)
