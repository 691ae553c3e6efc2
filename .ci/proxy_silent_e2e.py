"""Passive mode in front of servers that CANNOT announce: the proxy learns a silent change from a
correct client's re-list, and judges another client's stale call at once.

Run by .ci/proxy_e2e.sh after proxy_e2e.py (same install) with the venv's python:

    python proxy_silent_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

Why: a server with no `listChanged` (the SDKs' defaults) tells nobody when its tools change, so
the proxy's catalog would only see the change at its next `catalog_refresh_interval`. What it can
see is traffic: a client that re-lists gets the new list through the proxy, and that listing,
differing from the catalog, re-walks the catalog at once (docs/proxy.md, "Learning from the
traffic"). Issue 24 asks this of real SDK servers, not the exporter's lab.

Two real servers, each run with its SDK's defaults, each swapping search_legacy for search_v2
silently (`POST /admin/change`, no notification on any channel):
  fastmcp    fastmcp 4.2.3 `mcp.run(transport="http")` (.ci/peers/fastmcp_default_server.py,
             15 tools, one page), driven on the legacy era (initialize, a session);
  lowlevel   the Python SDK 2.3 low-level `Server` (.ci/peers/py_lowlevel_server.py, 14 tools,
             5 per page) on its 2026-07-28 path (server/discover, no session, tools.listChanged
             false, no subscriptions/listen), `?announce=0`.
One exporter runs one proxy in front of each (`proxies:`, catalog_refresh_interval 10m: no
periodic walk can happen during the run). For each, with the official Python SDK client
(.ci/peers/py_client.py, its own clientInfo name per client):
1. `<proxy>-correct` (mode relist) and `<proxy>-cached` (mode cached) list every page and call
   kb_stats; the server swaps silently; the proxy's catalog does not walk (1 s of quiet);
2. the correct client is told to re-list: it gets search_v2 through the proxy, then calls kb_stats
   only (listed before and after); the catalog walks once more (learned from that listing);
3. 5 s after that re-list went through the proxy, the cached client calls search_legacy from its
   old list; within 1 s of that call's return /metrics shows it under the cached client's label,
   `mcp_proxy_stale_tool_calls_total{tool="search_legacy"}` 1, and the server's own unknown-tool
   answer, `mcp_proxy_unknown_tool_answers_total{tool="search_legacy"}` 1 (the answer's text is
   checked against the shape docs/proxy.md lists for that SDK);
4. the correct client's label has no stale call, unknown-tool answer, stale-schema call,
   first-page-only session, cursor error or missing re-list; every cursor it got it followed;
   stale calls and unknown-tool answers name the cached client and no other.

Every wait has a deadline; every child (servers, exporter, clients) is killed on every exit; on
failure the logs are printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import sdk_peers_e2e as base
from proxy_e2e import Metrics
from sdk_peers_e2e import Failure, log

base.TAG = "proxy_silent"
PEERS = base.PEERS
GRACE_S = 2  # cursor_grace and relist_grace: a client that misbehaved would be flagged in the run
CLIENT_TIMEOUT = 60  # each client's own deadline (s)
AFTER_RELIST_S = 5.0  # the cached client calls this long after the correct client's re-list
COUNTED_WITHIN_S = 1.0  # and the proxy must show that call this soon after it returned
QUIET_S = 1.0  # after the silent swap: the catalog must not walk (nobody told it)
CLEAN_ZERO = ("mcp_proxy_stale_tool_calls_total", "mcp_proxy_unknown_tool_answers_total",
              "mcp_proxy_stale_schema_calls_total", "mcp_proxy_first_page_only_sessions_total",
              "mcp_proxy_cursor_errors_total", "mcp_proxy_sessions_without_relist_total")


@dataclass
class Peer:
    proxy: str  # the proxy's name, and the prefix of its clients' names
    script: str  # in .ci/peers, run as `python SCRIPT PORT`
    era: str  # the era the SDK clients speak to it through the proxy
    tools: int
    swap: str  # the silent swap's query on /admin/change
    shape: str  # the first text of the server's isError answer to a call of search_legacy
    shape_doc: str  # the row of docs/proxy.md's table of unknown-tool shapes it matches


PEER_LIST = [
    Peer("fastmcp", "fastmcp_default_server.py", "legacy", 15, "", "Unknown tool: 'search_legacy'",
         "`fastmcp` 4.2.3: isError result, `Unknown tool: 'NAME'`"),
    Peer("lowlevel", "py_lowlevel_server.py", "modern", 14, "?announce=0", "Unknown tool: search_legacy",
         "Python `mcp` 2.3 low-level `Server` with the peer's `on_call_tool`: isError result, `Unknown tool: NAME`"),
]


def catalog_walks(base_url: str, proxy: str) -> int:
    for p in json.loads(base.http("GET", f"{base_url}/proxy.json")):
        if p["name"] == proxy:
            return int(p["catalog_walks"])
    raise Failure(f"/proxy.json has no proxy {proxy}")


def children_alive() -> None:
    for name, proc, _ in base.CHILDREN:
        if not name.startswith("client-") and proc.poll() is not None:
            raise Failure(f"{name} exited with {proc.returncode}")


def poll(what: str, seconds: float, check) -> None:
    """Polls check() (a list of problems) until it is empty; fails with the last problems."""
    deadline = time.monotonic() + seconds
    problems = ["never polled"]
    while time.monotonic() < deadline:
        children_alive()
        try:
            problems = check()
        except (OSError, ValueError) as exc:
            problems = [f"not answering: {exc}"]
        if not problems:
            log(f"OK: {what}")
            return
        time.sleep(0.2)
    raise Failure(f"within {seconds:.0f} s, not {what}:\n  " + "\n  ".join(problems[:40]))


class Client:
    """One py_client.py process: released by its go file, read from its log."""

    def __init__(self, work: Path, url: str, name: str, mode: str, peer: Peer):
        self.name = name
        self.go_file = work / f"go-{name}"
        self.go_file.unlink(missing_ok=True)
        self.log = work / f"client-{name}.log"
        self.proc = base.start(f"client-{name}", [
            sys.executable, str(PEERS / "py_client.py"), url, "--name", name, "--mode", mode, "--go",
            str(self.go_file), "--timeout", str(CLIENT_TIMEOUT), "--era", peer.era, "--tools", str(peer.tools)], work)

    def line(self, kind: str) -> dict | None:
        """The client's `kind {json}` line, if printed; fails on `error` or an early exit."""
        text = self.log.read_text(errors="replace")
        for line in text.splitlines():
            if line.startswith(kind + " "):
                return json.loads(line[len(kind) + 1:])
        if "\nerror " in "\n" + text or self.proc.poll() not in (None, 0):
            raise Failure(f"client {self.name} failed:\n{text[-3000:]}")
        return None

    def wait(self, kind: str, seconds: float) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = self.line(kind)
            if got is not None:
                return got
            children_alive()
            time.sleep(0.02)
        raise Failure(f"client {self.name}: no `{kind}` within {seconds:.0f} s")

    def go(self) -> None:
        self.go_file.write_text("go\n")

    def exited(self, seconds: float) -> None:
        try:
            rc = self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise Failure(f"client {self.name} did not exit within {seconds:.0f} s") from None
        if rc != 0:
            raise Failure(f"client {self.name} exited {rc}:\n{self.log.read_text(errors='replace')[-3000:]}")


def correct_clean(m: Metrics, proxy: str, client: str) -> list[str]:
    lab = dict(proxy=proxy, client=client)
    bad = [f"{f} not exposed (a zero would prove nothing)" for f in CLEAN_ZERO if not m.has(f)]
    bad += [f"{client}: {f} = {m.sum(f, **lab)}" for f in CLEAN_ZERO if m.sum(f, **lab) != 0]
    issued = m.sum("mcp_proxy_cursors_issued_total", **lab)
    followed = m.sum("mcp_proxy_cursors_followed_total", **lab)
    if followed != issued:
        bad.append(f"{client}: cursors followed {followed} != issued {issued}")
    if m.sum("mcp_proxy_tools_list_requests_total", cursor="false", **lab) < 2:
        bad.append(f"{client}: fewer than 2 listings (before and after the swap) seen by the proxy")
    return bad


def attribution(m: Metrics, proxy: str, cached: str) -> list[str]:
    bad = []
    for family in ("mcp_proxy_stale_tool_calls_total", "mcp_proxy_unknown_tool_answers_total"):
        got = {ls["client"] for n, ls, v in m.samples
               if n == family and ls.get("proxy") == proxy and "client" in ls and v > 0}
        if got != {cached}:
            bad.append(f"{family}{{proxy={proxy}}}: clients {sorted(got)}, want [{cached}]")
        n = m.sum(family, proxy=proxy, client=cached)
        if n != 1 or m.sum(family, proxy=proxy, client=cached, tool="search_legacy") != 1:
            bad.append(f"{family}{{proxy={proxy},client={cached}}}: {n}, want 1 (tool=search_legacy)")
    return bad


def scenario(work: Path, base_url: str, proxy_url: str, upstream: str, peer: Peer) -> dict:
    """One server: the silent swap, the correct client's re-list, the cached client's call."""
    correct = Client(work, proxy_url, f"{peer.proxy}-correct", "relist", peer)
    cached = Client(work, proxy_url, f"{peer.proxy}-cached", "cached", peer)
    ready = {c.name: c.wait("ready", 40) for c in (correct, cached)}
    for name, r in ready.items():
        if r.get("protocol_version") != ("2026-07-28" if peer.era == "modern" else "2025-11-25"):
            raise Failure(f"{name}: protocol version {r.get('protocol_version')}, want the {peer.era} era")
    log(f"{peer.proxy}: clients ready ({peer.era} era, {ready[correct.name]['protocol_version']}, "
        f"{ready[correct.name]['pages_before']} page(s) of {peer.tools} tools)")

    walks0 = catalog_walks(base_url, peer.proxy)
    answer = json.loads(base.http("POST", upstream.replace("/mcp", f"/admin/change{peer.swap}")))
    if "search_v2" not in answer["tools"] or answer.get("notified") != 0:
        raise Failure(f"{peer.proxy}: /admin/change{peer.swap} did not swap silently: {answer}")
    log(f"{peer.proxy}: server swapped search_legacy -> search_v2 silently (notified 0)")
    time.sleep(QUIET_S)
    if catalog_walks(base_url, peer.proxy) != walks0:
        raise Failure(f"{peer.proxy}: the catalog walked after a silent swap, before any client re-listed: "
                      f"the test would not prove learning from traffic")

    correct.go()
    relisted = correct.wait("relisted", 20)
    log(f"{peer.proxy}: {correct.name} re-listed ({relisted['pages']} page(s)) through the proxy")
    poll(f"{peer.proxy}: the catalog walked again, learned from that listing (refresh interval 10m)",
         AFTER_RELIST_S - 0.5, lambda: [] if catalog_walks(base_url, peer.proxy) > walks0 else ["no walk yet"])
    walks1 = catalog_walks(base_url, peer.proxy)

    time.sleep(max(0.0, relisted["at"] + AFTER_RELIST_S - time.time()))
    cached.go()
    lab = dict(proxy=peer.proxy, client=cached.name, tool="search_legacy")
    # Scrape while waiting for the call: the first scrape that shows both counts, by its start.
    result, seen_at, counts = None, None, (0.0, 0.0)
    give_up = time.monotonic() + 20
    while time.monotonic() < give_up:
        if result is None:
            result = cached.line("result")
        scraped_at = time.time()
        m = Metrics(base_url)
        counts = (m.sum("mcp_proxy_stale_tool_calls_total", **lab), m.sum("mcp_proxy_unknown_tool_answers_total", **lab))
        if seen_at is None and counts == (1, 1):
            seen_at = scraped_at
        if result is not None and (seen_at is not None or time.time() > result["called_at"] + COUNTED_WITHIN_S):
            break
        children_alive()
        time.sleep(0.05)
    if result is None:
        raise Failure(f"{peer.proxy}: {cached.name} did not call search_legacy within 20 s")
    called_at = result["called_at"]
    after_relist = called_at - relisted["at"]
    if seen_at is None or seen_at > called_at + COUNTED_WITHIN_S:
        raise Failure(f"{peer.proxy}: {cached.name}'s call of search_legacy ({after_relist:.1f} s after the re-list) "
                      f"not counted within {COUNTED_WITHIN_S} s of its return: stale_tool_calls, "
                      f"unknown_tool_answers = {counts}, want (1, 1)")
    log(f"OK: {peer.proxy}: {cached.name} called search_legacy {after_relist:.2f} s after the re-list; "
        f"stale call and unknown-tool answer counted under its label, seen by a scrape "
        f"{seen_at - called_at:+.3f} s from the call's return")
    is_error, text = result["search_legacy"]
    if not is_error or text != peer.shape:
        raise Failure(f"{peer.proxy}: the server answered search_legacy with {result['search_legacy']}, "
                      f"want isError {peer.shape!r} ({peer.shape_doc})")
    log(f"{peer.proxy}: the server's own answer: isError, text {text!r} ({peer.shape_doc})")

    for c in (correct, cached):
        c.exited(20)
    poll(f"{peer.proxy}: nothing attributed to {correct.name}; stale call and unknown-tool answer on "
         f"{cached.name} only", 5, lambda: correct_clean(Metrics(base_url), peer.proxy, correct.name)
         + attribution(Metrics(base_url), peer.proxy, cached.name))
    walks2 = catalog_walks(base_url, peer.proxy)
    return {"walks": (walks0, walks1, walks2), "after_relist_s": round(after_relist, 2),
            "seen_s": round(seen_at - called_at, 3), "shape": text}


def main() -> int:
    args = base.arguments()
    work: Path = args.work
    py = sys.executable
    ports = {p.proxy: (base.free_port(), base.free_port()) for p in PEER_LIST}  # (upstream, proxy)
    exporter_port = base.free_port()
    base_url = f"http://127.0.0.1:{exporter_port}"

    procs = {p.proxy: base.start(p.proxy, [py, str(PEERS / p.script), str(ports[p.proxy][0])], work)
             for p in PEER_LIST}
    for p in PEER_LIST:
        base.wait_port(p.proxy, ports[p.proxy][0], procs[p.proxy], 60)

    config = work / "exporter.yml"
    config.write_text("proxies:\n" + "".join(f"""\
  - name: {p.proxy}
    listen: 127.0.0.1:{ports[p.proxy][1]}
    upstream: http://127.0.0.1:{ports[p.proxy][0]}/mcp
    client_label: clientInfo
    cursor_grace: {GRACE_S}s
    relist_grace: {GRACE_S}s
    catalog_refresh_interval: 10m
""" for p in PEER_LIST))
    r = subprocess.run([args.bin, "--config.check", f"--config.file={config}"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    exporter = base.start("exporter", [args.bin, f"--config.file={config}",
                                       f"--web.listen-address=127.0.0.1:{exporter_port}"], work)
    base.wait_port("exporter", exporter_port, exporter, 30)

    def catalogs_ready() -> list[str]:
        m = Metrics(base_url)
        bad = []
        for p in PEER_LIST:
            if m.sum("mcp_proxy_upstream_up", proxy=p.proxy) != 1:
                bad.append(f"{p.proxy}: mcp_proxy_upstream_up != 1")
            if m.sum("mcp_proxy_upstream_tools", proxy=p.proxy) != p.tools:
                bad.append(f"{p.proxy}: upstream_tools {m.sum('mcp_proxy_upstream_tools', proxy=p.proxy)}, want {p.tools}")
        return bad

    poll("each proxy's catalog walked its upstream", 60, catalogs_ready)
    outcome = {}
    for p in PEER_LIST:
        base.wait_port(f"proxy {p.proxy}", ports[p.proxy][1], exporter, 10)
        outcome[p.proxy] = scenario(work, base_url, f"http://127.0.0.1:{ports[p.proxy][1]}/mcp",
                                    f"http://127.0.0.1:{ports[p.proxy][0]}/mcp", p)
    for name, o in outcome.items():
        log(f"  {name}: {o}")
    log("PASS: silent changes learned from a correct client's re-list; the cached clients' stale calls counted "
        "on their own labels within 1 s, the correct clients clean")
    return 0


if __name__ == "__main__":
    base.run(main)
