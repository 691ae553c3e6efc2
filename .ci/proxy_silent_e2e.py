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
             15 tools, one page), driven on the legacy era (initialize, a session) by the
             TypeScript SDK 1.x client (.ci/peers/ts_client.mjs) and the Python SDK client
             (.ci/peers/py_client.py);
  lowlevel   the Python SDK 2.3 low-level `Server` (.ci/peers/py_lowlevel_server.py, 14 tools,
             5 per page) on its 2026-07-28 path (server/discover, no session, tools.listChanged
             false, no subscriptions/listen), `?announce=0`, driven by the Python SDK client with
             --era modern (the TypeScript SDK 1.x client has no 2026-07-28 path).
One exporter runs one proxy in front of each (`proxies:`, catalog_refresh_interval 10m: no
periodic walk can happen during the run). For each, every client with its own clientInfo name:
1. `<proxy>-<sdk>-correct` (mode relist) and `<proxy>-<sdk>-cached` (mode cached) list every page
   and call kb_stats; the server swaps silently; the proxy's catalog does not walk (1 s of quiet);
2. the correct clients are told to re-list, one after the other (the TypeScript one first): each
   gets search_v2 through the proxy, then calls kb_stats only (listed before and after); after
   the first re-list the catalog walks once more (learned from that listing);
3. 5 s after the last re-list went through the proxy, the cached clients call search_legacy from
   their old lists; within 1 s of each call's return /metrics shows it under that client's own
   label, `mcp_proxy_stale_tool_calls_total{tool="search_legacy"}` 1, and the server's own
   unknown-tool answer, `mcp_proxy_unknown_tool_answers_total{tool="search_legacy"}` 1 (the
   answer's text is checked against the shape docs/proxy.md lists for that SDK);
4. the correct clients' labels have no stale call, unknown-tool answer, stale-schema call,
   first-page-only session, cursor error or missing re-list; every cursor they got they followed;
   stale calls and unknown-tool answers name the cached clients and no other.
Without the correct clients' re-list the catalog still lists search_legacy and the same call is
not counted stale (only the server's unknown-tool answer is), so the 1 s bound proves the
learning. The walks logged at the end are: before the swap, after the learning, at the end (a
call of a tool the catalog no longer lists walks once more when the last walk is 5 s old or more,
src/proxy/upstream_tools.rs UNKNOWN_TOOL_REWALK, so the cached calls may add one).

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

import proxy_e2e
import sdk_peers_e2e as base
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
# Of those, the families a client's series have from its first request (the per-tool ones appear
# with their first event): their absence would mean a wrong name, not a zero.
ALWAYS = ("mcp_proxy_first_page_only_sessions_total", "mcp_proxy_cursor_errors_total",
          "mcp_proxy_sessions_without_relist_total")


@dataclass
class Peer:
    proxy: str  # the proxy's name, and the prefix of its clients' names
    script: str  # in .ci/peers, run as `python SCRIPT PORT`
    era: str  # the era the SDK clients speak to it through the proxy
    tools: int
    swap: str  # the silent swap's query on /admin/change
    shape: str  # the first text of the server's isError answer to a call of search_legacy
    shape_doc: str  # the row of docs/proxy.md's table of unknown-tool shapes it matches
    sdks: tuple[str, ...]  # the client SDKs: py (py_client.py), ts (ts_client.mjs, legacy era only)


PEER_LIST = [
    Peer("fastmcp", "fastmcp_default_server.py", "legacy", 15, "", "Unknown tool: 'search_legacy'",
         "`fastmcp` 4.2.3: isError result, `Unknown tool: 'NAME'`", ("ts", "py")),
    Peer("lowlevel", "py_lowlevel_server.py", "modern", 14, "?announce=0", "Unknown tool: search_legacy",
         "Python `mcp` 2.3 low-level `Server` with the peer's `on_call_tool`: isError result, `Unknown tool: NAME`",
         ("py",)),
]


class Metrics(proxy_e2e.Metrics):
    """A scrape of /metrics; given `only`, just those families are parsed (a fast poll)."""

    def __init__(self, base_url: str, only: tuple[str, ...] = ()):
        text = base.http("GET", f"{base_url}/metrics").decode()
        if only:
            text = "\n".join(line for line in text.splitlines() if line.startswith(only))
        self.samples = base.parse_metrics(text)


def start_exporter(args, work: Path, config: Path, port: int):
    """The exporter on `config` once `--config.check` accepts it (else a Failure with its words),
    its port answering: the one start of every proxy check here."""
    r = subprocess.run([args.bin, "--config.check", f"--config.file={config}"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    exporter = base.start("exporter", [args.bin, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}"],
                          work)
    base.wait_port("exporter", port, exporter, 30)
    return exporter


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
    """One SDK client process (py_client.py or ts_client.mjs): released by its go file, read from
    its log. `name` and `era` override the peer's defaults; `extra` is appended to its argv
    (proxy_channels_e2e.py uses them)."""

    def __init__(self, args, work: Path, url: str, sdk: str, mode: str, peer: Peer, *, name: str | None = None,
                 era: str | None = None, extra: tuple[str, ...] = ()):
        self.name = name or f"{peer.proxy}-{sdk}-{'correct' if mode == 'relist' else mode}"
        self.go_file = work / f"go-{self.name}"
        self.go_file.unlink(missing_ok=True)
        self.log = work / f"client-{self.name}.log"
        if sdk == "py":
            argv = [sys.executable, str(PEERS / "py_client.py"), url, "--era", era or peer.era]
        else:
            argv = [args.node, str(PEERS / "ts_client.mjs"), url]
        argv += ["--name", self.name, "--mode", mode, "--go", str(self.go_file), "--timeout", str(CLIENT_TIMEOUT),
                 "--tools", str(peer.tools), *extra]
        self.proc = base.start(f"client-{self.name}", argv, work, env={"NODE_PATH": args.node_path})

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
    bad = [f"{client}: no {f} series (a zero would prove nothing)" for f in ALWAYS
           if not any(n == f and ls.get("proxy") == proxy and ls.get("client") == client for n, ls, _ in m.samples)]
    bad += [f"{client}: {f} = {m.sum(f, **lab)}" for f in CLEAN_ZERO if m.sum(f, **lab) != 0]
    issued = m.sum("mcp_proxy_cursors_issued_total", **lab)
    followed = m.sum("mcp_proxy_cursors_followed_total", **lab)
    if followed != issued:
        bad.append(f"{client}: cursors followed {followed} != issued {issued}")
    if m.sum("mcp_proxy_tools_list_requests_total", cursor="false", **lab) < 2:
        bad.append(f"{client}: fewer than 2 listings (before and after the swap) seen by the proxy")
    return bad


def attribution(m: Metrics, proxy: str, cached: list[str]) -> list[str]:
    """Stale calls and unknown-tool answers: one each per cached client, on search_legacy, and on
    no other client of this proxy."""
    bad = []
    for family in ("mcp_proxy_stale_tool_calls_total", "mcp_proxy_unknown_tool_answers_total"):
        got = {ls["client"] for n, ls, v in m.samples
               if n == family and ls.get("proxy") == proxy and "client" in ls and v > 0}
        if got != set(cached):
            bad.append(f"{family}{{proxy={proxy}}}: clients {sorted(got)}, want {sorted(cached)}")
        for c in cached:
            n = m.sum(family, proxy=proxy, client=c)
            if n != 1 or m.sum(family, proxy=proxy, client=c, tool="search_legacy") != 1:
                bad.append(f"{family}{{proxy={proxy},client={c}}}: {n}, want 1 (tool=search_legacy)")
    return bad


def scenario(args, work: Path, base_url: str, proxy_url: str, upstream: str, peer: Peer) -> dict:
    """One server: the silent swap, the correct clients' re-lists, the cached clients' calls."""
    correct = [Client(args, work, proxy_url, sdk, "relist", peer) for sdk in peer.sdks]
    cached = [Client(args, work, proxy_url, sdk, "cached", peer) for sdk in peer.sdks]
    want_version = "2026-07-28" if peer.era == "modern" else "2025-11-25"
    for c in correct + cached:
        r = c.wait("ready", 40)
        if r.get("protocol_version") != want_version:
            raise Failure(f"{c.name}: protocol version {r.get('protocol_version')}, want {want_version}")
        pages = r["pages_before"]
    log(f"{peer.proxy}: {len(correct + cached)} clients ready ({', '.join(peer.sdks)} SDK, {want_version}, "
        f"{pages} page(s) of {peer.tools} tools)")

    walks0 = catalog_walks(base_url, peer.proxy)
    answer = json.loads(base.http("POST", upstream.replace("/mcp", f"/admin/change{peer.swap}")))
    if "search_v2" not in answer["tools"] or answer.get("notified") != 0:
        raise Failure(f"{peer.proxy}: /admin/change{peer.swap} did not swap silently: {answer}")
    log(f"{peer.proxy}: server swapped search_legacy -> search_v2 silently (notified 0)")
    time.sleep(QUIET_S)
    if catalog_walks(base_url, peer.proxy) != walks0:
        raise Failure(f"{peer.proxy}: the catalog walked after a silent swap, before any client re-listed: "
                      f"the test would not prove learning from traffic")

    # The correct clients re-list one after the other; the first one's listing teaches the catalog.
    relisted_at = []
    for i, c in enumerate(correct):
        c.go()
        relisted = c.wait("relisted", 20)
        relisted_at.append(relisted["at"])
        log(f"{peer.proxy}: {c.name} re-listed ({relisted['pages']} page(s)) through the proxy")
        if i == 0:
            poll(f"{peer.proxy}: the catalog walked again, learned from {c.name}'s listing (refresh interval 10m)",
                 AFTER_RELIST_S - 0.5, lambda: [] if catalog_walks(base_url, peer.proxy) > walks0 else ["no walk yet"])
    walks1 = catalog_walks(base_url, peer.proxy)

    time.sleep(max(0.0, relisted_at[-1] + AFTER_RELIST_S - time.time()))
    for c in cached:
        c.go()
    # Scrape while waiting for the calls: for each cached client, the first scrape (by its start)
    # that shows its stale call and the upstream's unknown-tool answer.
    results: dict[str, dict] = {}
    seen_at: dict[str, float] = {}
    counts: dict[str, tuple] = {}
    give_up = time.monotonic() + 20
    while time.monotonic() < give_up:
        for c in cached:
            if c.name not in results and (r := c.line("result")) is not None:
                results[c.name] = r
        scraped_at = time.time()
        m = Metrics(base_url, ("mcp_proxy_stale_tool_calls_total", "mcp_proxy_unknown_tool_answers_total"))
        for c in cached:
            lab = dict(proxy=peer.proxy, client=c.name, tool="search_legacy")
            counts[c.name] = (m.sum("mcp_proxy_stale_tool_calls_total", **lab),
                              m.sum("mcp_proxy_unknown_tool_answers_total", **lab))
            if c.name not in seen_at and counts[c.name] == (1, 1):
                seen_at[c.name] = scraped_at
        if len(results) == len(cached) and all(
                c.name in seen_at or time.time() > results[c.name]["called_at"] + COUNTED_WITHIN_S for c in cached):
            break
        children_alive()
        time.sleep(0.05)
    outcome = {"walks": [walks0, walks1]}
    for c in cached:
        if c.name not in results:
            raise Failure(f"{peer.proxy}: {c.name} did not call search_legacy within 20 s")
        called_at = results[c.name]["called_at"]
        after = called_at - relisted_at[0], called_at - relisted_at[-1]
        seen = seen_at.get(c.name)
        if seen is None or seen > called_at + COUNTED_WITHIN_S:
            raise Failure(f"{peer.proxy}: {c.name}'s call of search_legacy ({after[-1]:.1f} s after the last re-list) "
                          f"not counted within {COUNTED_WITHIN_S} s of its return: stale_tool_calls, "
                          f"unknown_tool_answers = {counts[c.name]}, want (1, 1)")
        log(f"OK: {peer.proxy}: {c.name} called search_legacy {after[0]:.2f} s after the first re-list "
            f"({after[-1]:.2f} s after the last); stale call and unknown-tool answer counted under its label, "
            f"seen by a scrape {seen - called_at:+.3f} s from the call's return")
        is_error, text = results[c.name]["search_legacy"]
        if not is_error or text != peer.shape:
            raise Failure(f"{peer.proxy}: the server answered {c.name}'s search_legacy with "
                          f"{results[c.name]['search_legacy']}, want isError {peer.shape!r} ({peer.shape_doc})")
        log(f"{peer.proxy}: the server's own answer to {c.name}: isError, text {text!r} ({peer.shape_doc})")
        outcome[c.name] = {"after_relist_s": round(after[-1], 2), "seen_s": round(seen - called_at, 3)}

    for c in correct + cached:
        c.exited(20)
    names = [c.name for c in cached]
    poll(f"{peer.proxy}: nothing attributed to {', '.join(c.name for c in correct)}; stale calls and "
         f"unknown-tool answers on {', '.join(names)} only", 5,
         lambda: [p for c in correct for p in correct_clean(Metrics(base_url), peer.proxy, c.name)]
         + attribution(Metrics(base_url), peer.proxy, names))
    outcome["walks"].append(catalog_walks(base_url, peer.proxy))
    return outcome


def run_scenarios(args, work: Path, base_url: str, ports: dict, peers: list, exporter, scenario) -> dict:
    """Once each proxy's catalog walked its upstream (up, all its tools), `scenario` for each peer
    through its proxy (`ports[proxy]`: upstream port, proxy port); the outcomes are logged."""

    def catalogs_ready() -> list[str]:
        m = Metrics(base_url)
        bad = []
        for p in peers:
            if m.sum("mcp_proxy_upstream_up", proxy=p.proxy) != 1:
                bad.append(f"{p.proxy}: mcp_proxy_upstream_up != 1")
            if m.sum("mcp_proxy_upstream_tools", proxy=p.proxy) != p.tools:
                bad.append(f"{p.proxy}: upstream_tools {m.sum('mcp_proxy_upstream_tools', proxy=p.proxy)}, want {p.tools}")
        return bad

    poll("each proxy's catalog walked its upstream", 60, catalogs_ready)
    outcome = {}
    for p in peers:
        base.wait_port(f"proxy {p.proxy}", ports[p.proxy][1], exporter, 10)
        outcome[p.proxy] = scenario(args, work, base_url, f"http://127.0.0.1:{ports[p.proxy][1]}/mcp",
                                    f"http://127.0.0.1:{ports[p.proxy][0]}/mcp", p)
    for name, o in outcome.items():
        log(f"  {name}: {o}")
    return outcome


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
    exporter = start_exporter(args, work, config, exporter_port)

    run_scenarios(args, work, base_url, ports, PEER_LIST, exporter, scenario)
    log("PASS: silent changes learned from a correct client's re-list; the cached clients' stale calls counted "
        "on their own labels within 1 s, the correct clients clean")
    return 0


if __name__ == "__main__":
    base.run(main)
