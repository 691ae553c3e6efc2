"""Healing (`heal: true`) with real SDK clients in front of a server that cannot announce: the
clients that were calling a removed tool are told, re-list and stop; with heal off the proxy
changes nothing on the wire (issue 24).

Run by .ci/proxy_e2e.sh after proxy_silent_e2e.py (same install) with the venv's python:

    python proxy_heal_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

The server: fastmcp 4.2.3 with its defaults (.ci/peers/fastmcp_default_server.py, `http`, 15
tools, one page), legacy era (initialize, a session, the SDK clients' GET stream, on which
fastmcp never sends anything). `POST /admin/change` swaps search_legacy for search_v2 silently.
One exporter, two proxies to that one server, both with catalog_refresh_interval 10m (no periodic
walk during the run): `heal` (heal: true) and `plain` (no heal). Through each, with its own
clientInfo name `<proxy>-<sdk>-<mode>`:
  <p>-py-heal, <p>-ts-heal      the Python SDK and TypeScript SDK 1.x clients in mode heal: list
                                every page, keep the GET stream open, re-list every page on each
                                list_changed, every 0.5 s call search_legacy while their latest
                                listing has it, kb_stats otherwise;
  <p>-py-ignore, <p>-ts-ignore  mode ignore: list, and once told call search_legacy 3 times from
                                that list (list_changed heard and ignored);
  <p>-py-correct                mode relist: re-lists when told, so the proxy's catalog learns the
                                silent change from its listing (docs/proxy.md, "Learning from the
                                traffic").
Steps: every client ready, the heal clients' search_legacy calls succeed; the server swaps
silently; the correct clients re-list and each catalog walks once more (learned); then
  heal proxy   each heal and ignore client gets exactly one list_changed
               (`mcp_proxy_heal_notifications_total{client}` 1, none for the correct client, no
               upstream list_changed forwarded); the heal clients re-list once, their listing has
               search_v2 and not search_legacy, and they make no search_legacy call after that
               re-list (watched for 3 s more, while they call kb_stats); the ignore clients' calls
               are answered -32602 "Unknown tool: search_legacy (the server's tool list changed;
               re-list with tools/list)" by the proxy, never reaching the server:
               `mcp_proxy_heal_refused_calls_total{client}` 3 and no
               `mcp_proxy_unknown_tool_answers_total` for them (the server's own answer would count
               there; fastmcp has no log of calls);
  plain proxy  nobody gets a list_changed (the server sent none) or re-lists; the heal clients keep
               calling search_legacy and, like the ignore clients, get the server's own answer
               (isError, "Unknown tool: 'search_legacy'"), counted in
               `mcp_proxy_unknown_tool_answers_total{client}`; no `mcp_proxy_heal_*` series.
The heal clients' calls of search_legacy between the swap and their re-list (at most one or two:
the catalog learns within a second) may get the server's answer or the proxy's refusal; they are
reported, not judged. Legacy era only: the Python SDK 2.3 modern client (`ClientSession.discover`)
does not open `subscriptions/listen` by itself (only an explicit `Client.listen()` does), the
TypeScript SDK 1.x client has no 2026-07-28 path, and the low-level peer serves no listen.

Every wait has a deadline; every child (server, exporter, clients) is killed on every exit; on
failure the logs and the proxies' heal, stale and unknown-tool /metrics lines are printed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import proxy_silent_e2e as silent
import sdk_peers_e2e as base
from proxy_silent_e2e import Client, Metrics, catalog_walks, poll
from sdk_peers_e2e import Failure, log

base.TAG = "proxy_heal"
PEERS = base.PEERS
FASTMCP = dataclasses.replace(silent.PEER_LIST[0], sdks=("py", "ts"))  # fastmcp defaults, legacy, 15 tools
PROXIES = ("heal", "plain")  # heal: true, and without heal
WATCH_S = 3.0  # after the heal clients re-listed: they must not call search_legacy again
SERVER_ANSWER = "Unknown tool: 'search_legacy'"  # fastmcp's own isError text (docs/proxy.md's table)
REFUSAL = "Unknown tool: search_legacy (the server's tool list changed; re-list with tools/list)"
METRIC_LINES = ("mcp_proxy_heal_", "mcp_proxy_unknown_tool_answers_total", "mcp_proxy_stale_tool_calls_total",
                "mcp_proxy_list_changed_forwarded_total", "mcp_proxy_upstream_")


def refused(call: list) -> bool:
    """A search_legacy call answered with the proxy's refusal (the TS SDK prefixes `MCP error -32602: `)."""
    _at, is_error, code, text = call
    return is_error and code == -32602 and text.endswith(REFUSAL) and "re-list" in text


def server_answer(call: list) -> bool:
    _at, is_error, code, text = call
    return is_error and code is None and text == SERVER_ANSWER


def check_heal(name: str, r: dict, swapped_at: float) -> list[str]:
    """A heal-mode client through the heal proxy."""
    bad = []
    before = [c for c in r["legacy_calls"] if c[0] < swapped_at]
    if not before or not all(not c[1] for c in before):
        bad.append(f"{name}: search_legacy before the swap: {before[:3]} (want successful calls)")
    if len(r["list_changed_at"]) != 1 or r["list_changed_at"][0] < swapped_at:
        bad.append(f"{name}: list_changed heard at {r['list_changed_at']}, want exactly one after the swap")
    if len(r["relists"]) != 1:
        bad.append(f"{name}: re-lists {r['relists']}, want exactly one")
        return bad
    relisted_at, pages, has_legacy, has_v2 = r["relists"][0]
    if has_legacy or not has_v2:
        bad.append(f"{name}: its re-list has search_legacy {has_legacy}, search_v2 {has_v2}")
    after = [c for c in r["legacy_calls"] if c[0] > relisted_at]
    if after:
        bad.append(f"{name}: {len(after)} search_legacy call(s) after its re-list: {after[:3]}")
    if r["kb_stats_calls"] < 3 or r["kb_stats_errors"]:
        bad.append(f"{name}: after the re-list kb_stats calls {r['kb_stats_calls']}, errors {r['kb_stats_errors'][:3]}")
    gap = [c for c in r["legacy_calls"] if swapped_at <= c[0] <= relisted_at]
    odd = [c for c in gap if not (server_answer(c) or refused(c))]
    if odd:
        bad.append(f"{name}: search_legacy between the swap and the re-list answered neither by the server "
                   f"nor by the proxy's refusal: {odd[:3]}")
    return bad


def check_plain(name: str, r: dict, swapped_at: float) -> list[str]:
    """A heal-mode client through the plain proxy: nothing heard, it keeps calling, the server answers."""
    bad = []
    if r["list_changed_at"] or r["relists"]:
        bad.append(f"{name}: list_changed {r['list_changed_at']}, re-lists {r['relists']}: want none (heal off)")
    late = [c for c in r["legacy_calls"] if c[0] > swapped_at + 0.3]
    if len(late) < 4:
        bad.append(f"{name}: {len(late)} search_legacy calls after the swap, want it to keep calling")
    if not all(server_answer(c) for c in late):
        bad.append(f"{name}: search_legacy after the swap not the server's own answer: "
                   f"{[c for c in late if not server_answer(c)][:3]}")
    return bad


def check_ignore(name: str, r: dict, heal: bool) -> list[str]:
    want = refused if heal else server_answer
    calls = r["legacy_calls"]
    bad = []
    if len(calls) != 3 or not all(want(c) for c in calls):
        bad.append(f"{name}: search_legacy answers {calls}, want 3 x "
                   + (f"-32602 {REFUSAL!r} (the proxy)" if heal else f"isError {SERVER_ANSWER!r} (the server)"))
    if len(r["list_changed_at"]) != (1 if heal else 0):
        bad.append(f"{name}: list_changed heard {len(r['list_changed_at'])}, want {1 if heal else 0}")
    return bad


def check_metrics(m: Metrics, clients: dict[str, dict[str, Client]]) -> list[str]:
    bad = []
    for proxy, cs in clients.items():
        fwd = m.sum("mcp_proxy_list_changed_forwarded_total", proxy=proxy)
        if fwd:
            bad.append(f"{proxy}: mcp_proxy_list_changed_forwarded_total {fwd}: the server sent a list_changed?")
        for mode, c in cs.items():
            lab = dict(proxy=proxy, client=c.name)
            told = m.sum("mcp_proxy_heal_notifications_total", **lab)
            refusals = m.sum("mcp_proxy_heal_refused_calls_total", **lab)
            unknown = m.sum("mcp_proxy_unknown_tool_answers_total", **lab)
            want_told = 1 if proxy == "heal" and mode != "py-correct" else 0
            if told != want_told:
                bad.append(f"{c.name}: mcp_proxy_heal_notifications_total {told}, want {want_told}")
            if mode.endswith("ignore"):
                if proxy == "heal" and (refusals != 3 or unknown != 0):
                    bad.append(f"{c.name}: heal_refused_calls {refusals} (want 3), unknown_tool_answers {unknown} "
                               "(want 0: the server never saw the calls)")
                if proxy == "plain" and unknown != 3:
                    bad.append(f"{c.name}: unknown_tool_answers {unknown}, want 3 (the server's own answers)")
            if proxy == "plain" and mode.endswith("-heal") and unknown < 4:
                bad.append(f"{c.name}: unknown_tool_answers {unknown}, want the server's answers counted")
    heal_on_plain = [(n, ls) for n, ls, _ in m.samples if n.startswith("mcp_proxy_heal_") and ls.get("proxy") == "plain"]
    if heal_on_plain:
        bad.append(f"plain: heal series on a proxy without heal: {heal_on_plain[:3]}")
    if not any(n.startswith("mcp_proxy_heal_") and ls.get("proxy") == "heal" for n, ls, _ in m.samples):
        bad.append("heal: no mcp_proxy_heal_* series at all")
    return bad


def scenario(args, work: Path, base_url: str, ports: dict, upstream: str) -> dict:
    modes = [("py", "heal"), ("ts", "heal"), ("py", "ignore"), ("ts", "ignore"), ("py", "relist")]
    clients: dict[str, dict[str, Client]] = {}
    for proxy in PROXIES:
        peer = dataclasses.replace(FASTMCP, proxy=proxy)
        url = f"http://127.0.0.1:{ports[proxy]}/mcp"
        clients[proxy] = {f"{sdk}-{'correct' if mode == 'relist' else mode}": Client(args, work, url, sdk, mode, peer)
                          for sdk, mode in modes}
    every = [c for cs in clients.values() for c in cs.values()]
    for c in every:
        r = c.wait("ready", 40)
        if r.get("protocol_version") != "2025-11-25" or r.get("pages_before") != 1:
            raise Failure(f"{c.name}: ready {r}, want protocol 2025-11-25 and one page")
    log(f"{len(every)} clients ready (Python and TypeScript SDK, 2025-11-25, one page of {FASTMCP.tools} tools)")
    time.sleep(1.2)  # the heal clients call search_legacy (every 0.5 s) before the swap

    walks0 = {p: catalog_walks(base_url, p) for p in PROXIES}
    answer = json.loads(base.http("POST", upstream.replace("/mcp", "/admin/change")))
    swapped_at = time.time()
    if "search_v2" not in answer["tools"] or answer.get("notified") != 0:
        raise Failure(f"/admin/change did not swap silently: {answer}")
    log("fastmcp swapped search_legacy -> search_v2 silently (notified 0)")
    for p in PROXIES:
        clients[p]["py-correct"].go()
    for p in PROXIES:
        c = clients[p]["py-correct"]
        c.wait("relisted", 20)
        poll(f"{p}: the catalog walked again, learned from {c.name}'s listing (refresh interval 10m)", 5,
             lambda p=p: [] if catalog_walks(base_url, p) > walks0[p] else ["no walk yet"])

    heal_named = [c.name for k, c in clients["heal"].items() if k != "py-correct"]
    poll(f"heal: one list_changed sent to each of {', '.join(heal_named)}", 5,
         lambda: [f"{n}: {v}" for n in heal_named
                  if (v := Metrics(base_url, ("mcp_proxy_heal_",)).sum(
                      "mcp_proxy_heal_notifications_total", proxy="heal", client=n)) != 1])
    told_at = time.time()
    for p in PROXIES:
        for k in ("py-ignore", "ts-ignore"):
            clients[p][k].go()
    time.sleep(max(0.0, told_at + WATCH_S + 0.5 - time.time()))  # the heal clients watched, on both proxies
    for p in PROXIES:
        for k in ("py-heal", "ts-heal"):
            clients[p][k].go()  # stop
    results = {}
    for c in every:
        c.exited(20)
        results[c.name] = c.line("result")

    bad = []
    for p in PROXIES:
        for k, c in clients[p].items():
            r = results[c.name]
            if k.endswith("-heal"):
                bad += (check_heal if p == "heal" else check_plain)(c.name, r, swapped_at)
            elif k.endswith("-ignore"):
                bad += check_ignore(c.name, r, p == "heal")
    if bad:
        raise Failure("the clients' own reports:\n  " + "\n  ".join(bad))
    log("OK: through heal, each heal client heard one list_changed, re-listed once and called search_legacy no "
        "more; the ignore clients got the proxy's -32602; through plain, nothing heard, the server's own answers")
    poll("the counters: heal notifications 1 per stale client on heal, refusals 3 and no unknown-tool answer for "
         "its ignore clients; on plain no heal series, the server's unknown-tool answers counted", 5,
         lambda: check_metrics(Metrics(base_url), clients))

    outcome = {}
    for p in PROXIES:
        for k in ("py-heal", "ts-heal"):
            r = results[clients[p][k].name]
            relist = r["relists"][0][0] if r["relists"] else None
            gap = [c for c in r["legacy_calls"] if c[0] >= swapped_at and (relist is None or c[0] <= relist)]
            outcome[clients[p][k].name] = {
                "list_changed": len(r["list_changed_at"]),
                "relists": len(r["relists"]),
                "told_s": round(r["list_changed_at"][0] - swapped_at, 3) if r["list_changed_at"] else None,
                "legacy_after_swap": len([c for c in r["legacy_calls"] if c[0] >= swapped_at]),
                "legacy_after_relist": len([c for c in r["legacy_calls"] if relist and c[0] > relist]),
                "gap_answers": ["refused" if refused(c) else "server" if server_answer(c) else "other" for c in gap],
                "refused_relist": any(refused(c) for c in r["legacy_calls"]),
            }
    return outcome


def main() -> int:
    args = base.arguments()
    work: Path = args.work
    upstream_port = base.free_port()
    ports = {p: base.free_port() for p in PROXIES}
    exporter_port = base.free_port()
    base_url = f"http://127.0.0.1:{exporter_port}"
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"

    server = base.start("fastmcp", [sys.executable, str(PEERS / FASTMCP.script), str(upstream_port)], work)
    base.wait_port("fastmcp", upstream_port, server, 60)
    config = work / "exporter.yml"
    config.write_text("proxies:\n" + "".join(f"""\
  - name: {p}
    listen: 127.0.0.1:{ports[p]}
    upstream: {upstream}
    client_label: clientInfo
    cursor_grace: {silent.GRACE_S}s
    relist_grace: {silent.GRACE_S}s
    catalog_refresh_interval: 10m
""" + ("    heal: true\n" if p == "heal" else "") for p in PROXIES))
    exporter = silent.start_exporter(args, work, config, exporter_port)
    try:
        poll("each proxy's catalog walked fastmcp", 60, lambda: [
            f"{p}: upstream_up {m.sum('mcp_proxy_upstream_up', proxy=p)}, tools {m.sum('mcp_proxy_upstream_tools', proxy=p)}"
            for m in [Metrics(base_url)] for p in PROXIES
            if m.sum("mcp_proxy_upstream_up", proxy=p) != 1 or m.sum("mcp_proxy_upstream_tools", proxy=p) != FASTMCP.tools])
        for p in PROXIES:
            base.wait_port(f"proxy {p}", ports[p], exporter, 10)
        outcome = scenario(args, work, base_url, ports, upstream)
    except BaseException:
        try:
            text = base.http("GET", f"{base_url}/metrics").decode()
            print("---- /metrics (heal, unknown-tool, stale, list_changed, upstream lines)", file=sys.stderr)
            print("\n".join(line for line in text.splitlines() if line.startswith(METRIC_LINES)), file=sys.stderr)
        except OSError as exc:
            print(f"---- /metrics not answering: {exc}", file=sys.stderr)
        raise
    for name, o in outcome.items():
        log(f"  {name}: {o}")
    log("PASS: with heal the SDK clients calling a removed tool were told once, re-listed and stopped calling it "
        "(the careless ones refused by the proxy); without heal nothing changed on the wire")
    return 0


if __name__ == "__main__":
    base.run(main)
