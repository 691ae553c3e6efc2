"""Passive mode on every channel and by each era's contract, with the official Python SDK clients.

Run by .ci/proxy_e2e.sh after proxy_silent_e2e.py (same install) with the venv's python:

    python proxy_channels_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

Why: the proxy reads a client's traffic on whichever channel it takes. On HTTP+SSE (2024-11-05)
the POSTs carry no session header (the session is in the message URL's `session_id`) and their
answers come on the GET stream, so unless each POST is tied to its session and its answer read
there, a client's listings, cursors and calls are nobody's. On 2026-07-28 a client has no
session, hears list_changed on its `subscriptions/listen` stream, and keeps a listing only as long
as the server's `ttlMs` (docs/proxy.md, "Each era's contract"). Both are proven here with the SDK's
own clients (.ci/peers/py_client.py), each with its own clientInfo name (the `client` label).

One exporter runs two proxies (catalog_refresh_interval 10m, cursor and re-list graces 2 s):
  sse     in front of the Python SDK HTTP+SSE server (.ci/peers/py_sse_server.py, `mcp` 2.3
          SseServerTransport, 14 tools, 8 per page; upstream http://127.0.0.1:PORT/sse), driven
          by `mcp.client.sse.sse_client` (--transport sse):
          1. `sse-py-correct` (lists every page, calls kb_stats), `sse-py-first-page` (one page,
             calls kb_search) and `sse-py-cached` (lists every page) are ready; the server swaps
             search_legacy for search_v2 and announces it on every SSE stream (each client's);
          2. the correct client gets list_changed, re-lists every page, calls search_v2 and
             kb_stats; once the proxy's catalog walked again the cached client calls
             search_legacy from its old list;
          3. per `client`: the correct one has cursors issued == followed >= 2 (the cached one
             == 1), list_changed
             forwarded >= 1, a re-list timed (relist_lag_seconds_count grows) and nothing else
             (no session without re-list, stale call, first-page-only session ...); the first-page
             one exactly 1 first-page-only session and no cursor sent or followed; the cached one 1
             stale call and 1 unknown-tool answer on search_legacy (the server's isError answer,
             which came on the GET stream); each signal on no other client. Every one of these
             needs the POST tied to its session (the label is the session's clientInfo) and its
             answer read on the stream (cursors, tool lists and the unknown-tool answer are in
             answers). The SDK server often writes an answer on the stream before its POST's
             202, so this also proves a page's nextCursor is not taken for one its own request
             abandoned (it was, up to e6f30fe: tests/proxy_era.rs
             http_sse_answers_before_their_202_keep_the_walk).
  modern  in front of the dual-era Python SDK server (.ci/peers/py_modern_server.py) with
          `--ttl-ms 0` (the SDK's CacheHint default: every listing stale at once) and the proxy's
          `ttl_grace: 1s`:
          4. `modern-py-correct` (2026-07-28, opens the SDK's subscriptions/listen, lists every page
             and calls kb_stats right after), `modern-py-expired` (2026-07-28) and
             `modern-py-legacy-expired` (the legacy era, initialize and a session, on the same
             server) list every page, call kb_stats, and 3 s later (past ttlMs 0 + ttl_grace 1 s)
             the two expired ones call kb_stats again without listing: exactly the modern one's
             second call counts in `mcp_proxy_expired_listing_calls_total` (1: its first call,
             right after the listing, does not), the legacy one has 0 (its contract: cache until
             list_changed), the correct one 0;
          5. the server swaps, announced on the listen stream; the correct client hears
             list_changed there, re-lists every page and calls search_v2 and kb_stats:
             list_changed forwarded >= 1 on its label, a re-list timed, no session without
             re-list, and still no expired-listing call.

Every wait has a deadline; every child (servers, exporter, clients) is killed on every exit; on
failure the logs and the proxies' /metrics lines are printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import proxy_silent_e2e as silent
import sdk_peers_e2e as base
from proxy_silent_e2e import Client, Metrics, Peer, catalog_walks, correct_clean, poll
from sdk_peers_e2e import Failure, log

base.TAG = "proxy_channels"
PEERS = base.PEERS
GRACE_S = silent.GRACE_S
TTL_GRACE_S = 1  # the modern proxy's ttl_grace; the server's ttlMs is 0
LATER_S = 3.0  # the expired clients' second call comes this long after their listing
UNKNOWN = "Unknown tool: search_legacy"  # the peers' on_call_tool answer (kb_catalog.py), isError
SSE = Peer("sse", "py_sse_server.py", "legacy", 14, "", UNKNOWN, "", ("py",))
MODERN = Peer("modern", "py_modern_server.py", "modern", 14, "", UNKNOWN, "", ("py",))
LAG = "mcp_proxy_relist_lag_seconds_count"
EXPIRED = "mcp_proxy_expired_listing_calls_total"


def want(bad: list[str], what: str, got: float, ok) -> None:
    if not ok(got):
        bad.append(f"{what} = {got}")


def expired_count(m: Metrics, proxy: str, client: str) -> float | None:
    """The client's expired-listing calls; None when its series is absent (a wrong name)."""
    values = [v for n, ls, v in m.samples if n == EXPIRED and ls.get("proxy") == proxy and ls.get("client") == client]
    return sum(values) if values else None


def ready_all(clients: list[Client], versions: dict[str, str]) -> dict[str, dict]:
    out = {}
    for c in clients:
        r = c.wait("ready", 40)
        if r.get("protocol_version") != versions[c.name]:
            raise Failure(f"{c.name}: protocol version {r.get('protocol_version')}, want {versions[c.name]}")
        out[c.name] = r
    return out


def swap(upstream_base: str, proxy: str) -> int:
    """The server's announced swap search_legacy -> search_v2; how many it notified."""
    answer = json.loads(base.http("POST", f"{upstream_base}/admin/change"))
    if "search_v2" not in answer["tools"]:
        raise Failure(f"{proxy}: /admin/change did not swap in search_v2: {answer}")
    log(f"{proxy}: server swapped search_legacy -> search_v2, announced (notified {answer['notified']})")
    return int(answer["notified"])


def sse_scenario(args, work: Path, base_url: str, proxy_url: str, upstream_base: str) -> dict:
    sse = ("--transport", "sse")
    correct = Client(args, work, proxy_url, "py", "correct", SSE, extra=sse)
    first = Client(args, work, proxy_url, "py", "first-page", SSE, extra=sse)
    cached = Client(args, work, proxy_url, "py", "cached", SSE, extra=sse)
    clients = [correct, first, cached]
    ready = ready_all(clients, {c.name: "2025-11-25" for c in clients})
    log(f"sse: {len(clients)} clients ready over HTTP+SSE through the proxy (first page: "
        f"{ready[first.name]['first_page_tools']} of {SSE.tools} tools)")
    lag0 = Metrics(base_url, (LAG,)).sum(LAG, proxy=SSE.proxy)
    walks0 = catalog_walks(base_url, SSE.proxy)
    notified = swap(upstream_base, SSE.proxy)
    if notified < len(clients):  # one per client, and the proxy catalog's own session when it is open
        raise Failure(f"sse: the server notified {notified} SSE stream(s), want at least {len(clients)}")

    correct.go()
    r = correct.wait("result", 20)
    log(f"sse: {correct.name} heard list_changed, re-listed {r['pages_after']} pages, search_v2 {r['search_v2']}")
    poll("sse: the proxy's catalog walked the upstream since the swap", 15,
         lambda: [] if catalog_walks(base_url, SSE.proxy) > walks0 else ["no walk since the swap"])
    first.go()
    cached.go()
    r = cached.wait("result", 20)
    if r["search_legacy"] != [True, UNKNOWN]:
        raise Failure(f"sse: the server answered {cached.name}'s search_legacy with {r['search_legacy']}, "
                      f"want isError {UNKNOWN!r}")
    for c in clients:
        c.exited(20)

    def judged() -> list[str]:
        m = Metrics(base_url)
        lab = dict(proxy=SSE.proxy)
        bad = correct_clean(m, SSE.proxy, correct.name)
        issued = m.sum("mcp_proxy_cursors_issued_total", client=correct.name, **lab)
        want(bad, f"{correct.name}: cursors_issued_total (one per walk)", issued, lambda v: v >= 2)
        want(bad, f"{correct.name}: tools_list_requests_total{{cursor=true}} (== cursors issued {issued})",
             m.sum("mcp_proxy_tools_list_requests_total", client=correct.name, cursor="true", **lab),
             lambda v: v == issued)
        want(bad, f"{correct.name}: list_changed_forwarded_total",
             m.sum("mcp_proxy_list_changed_forwarded_total", client=correct.name, **lab), lambda v: v >= 1)
        want(bad, f"{LAG}{{proxy=sse}} (was {lag0})", m.sum(LAG, **lab), lambda v: v > lag0)
        want(bad, f"{first.name}: first_page_only_sessions_total",
             m.sum("mcp_proxy_first_page_only_sessions_total", client=first.name, **lab), lambda v: v == 1)
        want(bad, f"{first.name}: cursors_followed_total",
             m.sum("mcp_proxy_cursors_followed_total", client=first.name, **lab), lambda v: v == 0)
        want(bad, f"{first.name}: tools_list_requests_total{{cursor=true}}",
             m.sum("mcp_proxy_tools_list_requests_total", client=first.name, cursor="true", **lab), lambda v: v == 0)
        issued = m.sum("mcp_proxy_cursors_issued_total", client=cached.name, **lab)
        want(bad, f"{cached.name}: cursors_followed_total (== issued {issued} >= 1)",
             m.sum("mcp_proxy_cursors_followed_total", client=cached.name, **lab),
             lambda v: v == issued and v >= 1)
        fp = {ls["client"] for n, ls, v in m.samples
              if n == "mcp_proxy_first_page_only_sessions_total" and ls.get("proxy") == SSE.proxy and v > 0}
        if fp != {first.name}:
            bad.append(f"first_page_only_sessions_total{{proxy=sse}}: clients {sorted(fp)}, want [{first.name}]")
        return bad + silent.attribution(m, SSE.proxy, [cached.name])

    poll(f"sse: {correct.name} clean (every cursor followed, list_changed forwarded and re-listed), "
         f"{first.name} first page only, {cached.name}'s search_legacy stale and answered unknown, "
         f"each on its own label", GRACE_S + 10, judged)
    m = Metrics(base_url)
    counts = {c.name: {k: m.sum(f"mcp_proxy_{k}_total", proxy=SSE.proxy, client=c.name)
                       for k in ("cursors_issued", "cursors_followed", "first_page_only_sessions")}
              for c in (correct, cached)}
    return {"cursors": counts, "relist_lag_observations": m.sum(LAG, proxy=SSE.proxy) - lag0}


def modern_scenario(args, work: Path, base_url: str, proxy_url: str, upstream_base: str) -> dict:
    correct = Client(args, work, proxy_url, "py", "correct", MODERN)
    expired = Client(args, work, proxy_url, "py", "expired", MODERN)
    legacy = Client(args, work, proxy_url, "py", "expired", MODERN, name="modern-py-legacy-expired", era="legacy")
    clients = [correct, expired, legacy]
    ready = ready_all(clients, {correct.name: "2026-07-28", expired.name: "2026-07-28", legacy.name: "2025-11-25"})
    for c in (correct, expired):
        if ready[c.name].get("ttl_ms") != 0:
            raise Failure(f"{c.name}: the server's tools/list ttlMs {ready[c.name].get('ttl_ms')}, want 0")
    if not ready[correct.name].get("listening"):
        raise Failure(f"{correct.name}: no subscriptions/listen stream acknowledged")
    log(f"modern: {len(clients)} clients ready (ttlMs 0; {correct.name} listening on subscriptions/listen)")

    # 4. the expired clients call again LATER_S after their listing, without re-listing
    listed = max(ready[c.name]["listed_at"] for c in (expired, legacy))
    time.sleep(max(0.0, listed + LATER_S - time.time()))
    expired.go()
    legacy.go()
    later = {}
    for c in (expired, legacy):
        r = c.wait("result", 20)
        later[c.name] = round(r["called_at"] - r["listed_at"], 2)
        if later[c.name] < TTL_GRACE_S + 1:
            raise Failure(f"{c.name}: called {later[c.name]} s after its listing, want >= {TTL_GRACE_S + 1}")
        c.exited(20)
    log(f"modern: {expired.name} and {legacy.name} called kb_stats again without listing, "
        f"{later} s after their listings (ttlMs 0, ttl_grace {TTL_GRACE_S}s)")

    def expiry() -> list[str]:
        m = Metrics(base_url)
        got = {c.name: expired_count(m, MODERN.proxy, c.name) for c in clients}
        wanted = {correct.name: 0, expired.name: 1, legacy.name: 0}
        return [f"{EXPIRED}{{proxy=modern,client={n}}} = {got[n]}, want {w}" for n, w in wanted.items()
                if got[n] != w]

    poll(f"modern: {expired.name}'s late call counted as an expired-listing call (its first, fresh one not), "
         f"none for {legacy.name} (legacy contract) nor {correct.name}", 5, expiry)

    # 5. the announced swap, heard on the correct client's listen stream
    lag0 = Metrics(base_url, (LAG,)).sum(LAG, proxy=MODERN.proxy)
    swap(upstream_base, MODERN.proxy)
    correct.go()
    r = correct.wait("result", 20)
    correct.exited(20)
    log(f"modern: {correct.name} heard list_changed on its listen stream, re-listed {r['pages_after']} pages, "
        f"search_v2 {r['search_v2']}")

    def relisted() -> list[str]:
        m = Metrics(base_url)
        bad = correct_clean(m, MODERN.proxy, correct.name)
        want(bad, f"{correct.name}: list_changed_forwarded_total",
             m.sum("mcp_proxy_list_changed_forwarded_total", proxy=MODERN.proxy, client=correct.name),
             lambda v: v >= 1)
        want(bad, f"{LAG}{{proxy=modern}} (was {lag0})", m.sum(LAG, proxy=MODERN.proxy), lambda v: v > lag0)
        want(bad, f"{correct.name}: {EXPIRED}", expired_count(m, MODERN.proxy, correct.name), lambda v: v == 0)
        return bad

    poll(f"modern: {correct.name}'s list_changed forwarded on its listen stream and its re-list timed, "
         f"no session without re-list, no expired-listing call", GRACE_S + 10, relisted)
    return {"later_s": later}


def dump_metrics(base_url: str) -> None:
    """The proxies' /metrics lines, for a failure's diagnosis."""
    try:
        text = base.http("GET", f"{base_url}/metrics").decode()
    except OSError as exc:
        print(f"---- /metrics unavailable: {exc}", file=sys.stderr)
        return
    lines = [line for line in text.splitlines() if line.startswith("mcp_proxy_") and 'proxy="' in line]
    print(f"---- /metrics, mcp_proxy_* ({len(lines)} lines)", file=sys.stderr)
    print("\n".join(lines), file=sys.stderr)


def main() -> int:
    args = base.arguments()
    work: Path = args.work
    py = sys.executable
    ports = {p.proxy: (base.free_port(), base.free_port()) for p in (SSE, MODERN)}  # (upstream, proxy)
    exporter_port = base.free_port()
    base_url = f"http://127.0.0.1:{exporter_port}"
    try:
        return run(args, work, py, ports, exporter_port, base_url)
    except Failure:
        dump_metrics(base_url)
        raise
    except SystemExit:  # a signal (the outer timeout): the logs too, base.run prints them on Failure only
        dump_metrics(base_url)
        base.tail_logs()
        raise


def run(args, work: Path, py: str, ports: dict, exporter_port: int, base_url: str) -> int:
    server_args = {SSE.proxy: [], MODERN.proxy: ["--ttl-ms", "0"]}
    procs = {p.proxy: base.start(p.proxy, [py, str(PEERS / p.script), str(ports[p.proxy][0]), *server_args[p.proxy]],
                                 work) for p in (SSE, MODERN)}
    for p in (SSE, MODERN):
        base.wait_port(p.proxy, ports[p.proxy][0], procs[p.proxy], 60)
    upstream = {SSE.proxy: "/sse", MODERN.proxy: "/mcp"}
    ttl_grace = {SSE.proxy: "", MODERN.proxy: f"    ttl_grace: {TTL_GRACE_S}s\n"}

    config = work / "exporter.yml"
    config.write_text("proxies:\n" + "".join(f"""\
  - name: {p.proxy}
    listen: 127.0.0.1:{ports[p.proxy][1]}
    upstream: http://127.0.0.1:{ports[p.proxy][0]}{upstream[p.proxy]}
    client_label: clientInfo
    cursor_grace: {GRACE_S}s
    relist_grace: {GRACE_S}s
    catalog_refresh_interval: 10m
{ttl_grace[p.proxy]}""" for p in (SSE, MODERN)))
    exporter = silent.start_exporter(args, work, config, exporter_port)

    def catalogs_ready() -> list[str]:
        m = Metrics(base_url)
        bad = []
        for p in (SSE, MODERN):
            if m.sum("mcp_proxy_upstream_up", proxy=p.proxy) != 1:
                bad.append(f"{p.proxy}: mcp_proxy_upstream_up != 1")
            if m.sum("mcp_proxy_upstream_tools", proxy=p.proxy) != p.tools:
                bad.append(f"{p.proxy}: upstream_tools {m.sum('mcp_proxy_upstream_tools', proxy=p.proxy)}, "
                           f"want {p.tools}")
        return bad

    poll("each proxy's catalog walked its upstream (HTTP+SSE and Streamable HTTP)", 60, catalogs_ready)
    outcome = {}
    for p, scenario in ((SSE, sse_scenario), (MODERN, modern_scenario)):
        upstream_port, proxy_port = ports[p.proxy]
        base.wait_port(f"proxy {p.proxy}", proxy_port, exporter, 10)
        outcome[p.proxy] = scenario(args, work, base_url, f"http://127.0.0.1:{proxy_port}{upstream[p.proxy]}",
                                    f"http://127.0.0.1:{upstream_port}")
    for name, o in outcome.items():
        log(f"  {name}: {o}")
    log("PASS: HTTP+SSE sessions judged per client (cursors, list_changed, first page only, stale call); "
        "2026-07-28: list_changed on the listen stream re-listed, a listing past ttlMs + ttl_grace counted, "
        "the legacy client's not")
    return 0


if __name__ == "__main__":
    base.run(main)
