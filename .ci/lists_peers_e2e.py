"""The exporter against real SDK servers serving prompts, resources and a resource template (issue 26).

Run by .ci/lists_peers_e2e.sh (which installs the peers) with the venv's python:

    python lists_peers_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

Why: a client caches prompts, resources and resource templates as it caches tools. The tool list has
its real-peer runs (sdk_peers_e2e.py, modern_peers_e2e.py, default_peers_e2e.py); this one proves
the other lists against servers built with the SDKs' high-level APIs and their defaults: a removed
prompt and a removed resource are caught the way a removed tool is, under each era's contract.

The peers (.ci/peers/, the names of lists_catalog.mjs / py_lists_server.py: prompts kb_summarize,
kb_translate, kb_legacy_digest; resources kb://spaces/index, kb://articles/welcome,
kb://articles/retired; template kb://drafts/{slug}, whose literal prefix covers none of the
resources, so the removed one is really gone for readers too; tool kb_stats), each started twice,
once for an announced removal and once for a silent one (POST /admin/remove?announce=1|0 takes away
kb_legacy_digest and kb://articles/retired), plus a py and a ts1 instance behind the exporter's
proxies (step 6):
  py    Python SDK 2.3 `MCPServer` (py_lists_server.py), both eras; announced = the SDK's
        `Context.notify_prompts_changed()`/`notify_resources_changed()` (listen streams) and
        `ServerSession.send_prompt_list_changed()`/`send_resource_list_changed()` (legacy sessions)
  pynl  the same with `subscriptions=False` (--no-listen), silent only: a 2026-07-28 server that
        promises nothing about these lists
  ts1   TypeScript SDK 1.32 `McpServer` (ts_lists_server.mjs), legacy only; announced =
        `registerPrompt(...).remove()` and `registerResource(...).remove()` on every session's server
  ts2   TypeScript SDK 2.4 `McpServer` from `createMcpHandler(factory)` (ts2_lists_server.mjs);
        announced = `handler.notify.promptsChanged()` / `resourcesChanged()`

1. survey: each peer on fresh instances, raw HTTP, no exporter: the capabilities it declares on
   each era (`prompts.listChanged`, `resources.listChanged`), `ttlMs` of its 2026-07-28 listings,
   whether `subscriptions/listen` is served, the legacy GET stream, and where an announced and a
   silent removal arrive (listen, GET); the facts the expectations rely on are asserted (WIRE);
2. fresh instances; `EXPORTER_BIN pin URL` of py_sil (2026-07-28 and 2025-11-25), ts1_sil and
   ts2_sil: sections tools, prompts, resources, resource_templates (1/3/3/1 keys), given to the
   four silent targets of those peers as `pins:`; the exporter (audit 2 s, grace 3 s, default
   `lists:`, --log.level=debug) with one target per peer and era (see TARGETS) and two proxies
   (PROXIES, step 6), and waits until every target has walked every list: items server == cache
   (3 prompts, 3 resources, 1 template), drift 0, no unannounced change, no TTL violation, not
   stale, the promise each era's contract derives from the survey (in /status.json when this
   build has `lists[]` there); the pinned targets' `mcp_probe_list_pin_mismatches` 0 per list;
3. removes silently on the silent peers and waits (one audit + grace + slack) for: prompts and
   resources drift extra = 1, missing = changed = 0, templates untouched, and the verdict by the
   contract of THAT target: stale where a promise was made (legacy: always; 2026-07-28: declared
   listChanged) and never on pynl_modern (2026-07-28, promises nothing); the pinned targets'
   `mcp_probe_list_pin_mismatches` 1 for prompts and for resources, 0 for templates, no unpinned
   item, kb_stats as pinned;
4. removes with the SDK's announcement on the announced peers and waits for every announced target
   to follow (list notifications counted, items 2/2/1 in both views, drift 0, no unannounced
   change, not stale), and for ts2_legacy_ann (a legacy client of the TS v2 stateless fallback,
   which has no GET stream) to show the removal as an unannounced, stale one; then two more audits.
5. change class and pins: on every connection of every target,
   `mcp_probe_list_changes_total{change="removed"}` = 1 for prompts and for resources, every other
   class 0 or absent, nothing for resource_templates; `check --format json --pins FILE` against
   each pinned peer exits 1 with only `prompts_pins` and `resources_pins` failing, naming
   `kb_legacy_digest (pinned, not listed)` and `"kb://articles/retired" (pinned, not listed)`,
   and a fresh pin then passes (exit 0, the four pins rows pass);
6. proxy stale calls: proxies px_py (in front of a py instance, removal announced) and px_ts1 (a
   ts1 instance, silent; catalog_refresh_interval 2 s); once each catalog has walked 3/3/1, real
   SDK clients (.ci/peers/py_lists_client.py: Python `mcp` ClientSession) list the three lists
   through them: `cached` (legacy, and on px_py also `cached-modern`, 2026-07-28) and `relist`;
   the peers remove; once each catalog has walked 2/2/1, the relist clients re-list and use
   kb_summarize, kb://articles/welcome and kb://drafts/welcome (a URI the listed template
   produces), then the cached ones, without re-listing, `prompts/get kb_legacy_digest` and
   `resources/read kb://articles/retired` (each answered with the server's error); asserts
   `mcp_proxy_stale_list_calls_total{proxy,client,list}` >= 1 for prompts and for resources per
   cached client (none for resource_templates) and no stale call at all for the relist clients.

Every wait has a deadline; every child is killed on exit; on failure the logs are printed.
"""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import time
from pathlib import Path

import sdk_peers_e2e as e2e
from sdk_peers_e2e import Failure, Snapshot, free_port, log, start, wait_port, wait_until

sys.path.insert(0, str(e2e.PEERS))
import verify_wire as wire  # noqa: E402  (raw HTTP helpers: request, Stream, meta, headers)
from default_peers_e2e import Heard  # noqa: E402  (an SSE stream read in a thread)

e2e.TAG = "lists_peers"
AUDIT_S, GRACE_S = 2, 3
LEGACY = "2025-11-25"
# One audit plus the grace, plus the time a walk of four lists and our polling take on a loaded runner.
SILENT_DEADLINE_S = AUDIT_S + GRACE_S + 15
LISTS = ["prompts", "resources", "resource_templates"]
BEFORE = {"prompts": 3, "resources": 3, "resource_templates": 1}
AFTER = {"prompts": 2, "resources": 2, "resource_templates": 1}
REMOVED = {"prompts": "kb_legacy_digest", "resources": "kb://articles/retired"}
NOTIFICATION = {"prompts": "notifications/prompts/list_changed", "resources": "notifications/resources/list_changed"}
LISTEN_WAIT_S, QUIET_S = 3, 1.5

# ---------------------------------------------------------------------------------------- peers

# peer instance -> (kind, how it is removed); kinds map to argv in peer_argv
INSTANCES = {
    "py_ann": ("py", "announce"), "py_sil": ("py", "silent"), "pynl_sil": ("pynl", "silent"),
    "ts1_ann": ("ts1", "announce"), "ts1_sil": ("ts1", "silent"),
    "ts2_ann": ("ts2", "announce"), "ts2_sil": ("ts2", "silent"),
}

# target -> (peer instance, protocol_version, era)
TARGETS = {
    "py_modern_ann": ("py_ann", "auto", "modern"),
    "py_legacy_ann": ("py_ann", LEGACY, "legacy"),
    "ts1_ann": ("ts1_ann", "auto", "legacy"),
    "ts2_modern_ann": ("ts2_ann", "auto", "modern"),
    "ts2_legacy_ann": ("ts2_ann", LEGACY, "legacy"),
    "py_modern_sil": ("py_sil", "auto", "modern"),
    "py_legacy_sil": ("py_sil", LEGACY, "legacy"),
    "pynl_modern_sil": ("pynl_sil", "auto", "modern"),
    "ts1_sil": ("ts1_sil", "auto", "legacy"),
    "ts2_modern_sil": ("ts2_sil", "auto", "modern"),
}


# Fresh peers behind the exporter's proxies (not surveyed, not targets): instance -> kind, and
# proxy -> (its upstream instance, whether that removal is announced)
PROXIED_PEERS = {"py_px": "py", "ts1_px": "ts1"}
PROXIES = {"px_py": ("py_px", True), "px_ts1": ("ts1_px", False)}
CATALOG_S = 2  # the proxies' catalog_refresh_interval: how soon a silent removal reaches a catalog
# Pins, taken before the silent removals: label -> (instance, protocol_version or None for auto)
PINS = {"py_modern": ("py_sil", None), "py_legacy": ("py_sil", LEGACY), "ts1": ("ts1_sil", None),
        "ts2": ("ts2_sil", None)}
# pinned target -> its pins file's label: `pins:` in the exporter's config
PINNED_TARGETS = {"py_modern_sil": "py_modern", "py_legacy_sil": "py_legacy", "ts1_sil": "ts1", "ts2_modern_sil": "ts2"}
PIN_SECTIONS = {"tools": ("name", {"kb_stats"}),
                "prompts": ("name", {"kb_summarize", "kb_translate", "kb_legacy_digest"}),
                "resources": ("uri", {"kb://spaces/index", "kb://articles/welcome", "kb://articles/retired"}),
                "resource_templates": ("uriTemplate", {"kb://drafts/{slug}"})}


def peer_argv(kind: str, port: int, node: str) -> list[str]:
    py, peers = sys.executable, e2e.PEERS
    return {
        "py": [py, str(peers / "py_lists_server.py"), str(port)],
        "pynl": [py, str(peers / "py_lists_server.py"), str(port), "--no-listen"],
        "ts1": [node, str(peers / "ts_lists_server.mjs"), str(port)],
        "ts2": [node, str(peers / "ts2_lists_server.mjs"), str(port)],
    }[kind]


def start_instances(names: list[str], suffix: str, node: str, node_path: str, logdir: Path) -> dict[str, int]:
    ports, procs = {}, {}
    for name in names:
        ports[name] = free_port()
        kind = PROXIED_PEERS[name] if name in PROXIED_PEERS else INSTANCES[name][0]
        procs[name] = start(f"{name}{suffix}", peer_argv(kind, ports[name], node), logdir,
                            env={"NODE_PATH": node_path})
    for name in names:
        wait_port(name + suffix, ports[name], procs[name], 60)
    return ports


def remove(port: int, announce: bool) -> dict:
    r = wire.request(port, "POST", f"/admin/remove?announce={1 if announce else 0}", None, {})
    if r.status != 200:
        raise Failure(f"POST /admin/remove on port {port}: HTTP {r.status} {r.body[:200]!r}")
    answer = json.loads(r.body)
    if REMOVED["prompts"] in answer["prompts"] or REMOVED["resources"] in answer["resources"]:
        raise Failure(f"/admin/remove on port {port} did not remove: {answer}")
    return answer

# ---------------------------------------------------------------------------------------- survey


def count(heard: Heard | None, method: str) -> int | str:
    return "no stream" if heard is None else sum(1 for m in heard.messages if m.get("method") == method)


def arrived(heard: Heard | None, before: dict, expect: bool) -> dict:
    """Per list, how many list_changed arrived since `before`: waits up to LISTEN_WAIT_S for the
    expected ones, then QUIET_S more for any that follow (or QUIET_S for an absence)."""
    if heard is None:
        return {k: "no stream" for k in NOTIFICATION}
    deadline = time.monotonic() + (LISTEN_WAIT_S if expect else 0)
    while time.monotonic() < deadline and any(count(heard, n) <= before[k] for k, n in NOTIFICATION.items()):
        time.sleep(0.05)
    time.sleep(QUIET_S)
    return {k: count(heard, n) - before[k] for k, n in NOTIFICATION.items()}


def survey_instance(name: str, port: int) -> dict:
    kind, how = INSTANCES[name]
    f: dict = {}
    r = wire.request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                                            "params": {"_meta": wire.meta()}}, wire.modern_headers("server/discover"))
    res = r.first().get("result")
    f["modern served"] = res is not None
    listen = None
    if res is not None:
        caps = res.get("capabilities", {})
        f["modern prompts"], f["modern resources"] = caps.get("prompts"), caps.get("resources")
        for i, method in enumerate(["prompts/list", "resources/list", "resources/templates/list"]):
            page = wire.request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 2 + i, "method": method,
                                                       "params": {"_meta": wire.meta()}},
                                wire.modern_headers(method)).response(2 + i).get("result", {})
            key = {"prompts/list": "prompts", "resources/list": "resources"}.get(method, "resourceTemplates")
            f[f"modern {method}"] = {"items": len(page.get(key, [])), "ttlMs": page.get("ttlMs"),
                                     "cacheScope": page.get("cacheScope")}
        body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                "params": {"_meta": wire.meta(), "notifications": {"promptsListChanged": True, "resourcesListChanged": True}}}
        s = wire.Stream(port, "POST", "/mcp", body, wire.modern_headers("subscriptions/listen"))
        f["listen served"] = False
        if s.status == 200 and "text/event-stream" in (s.headers.get("content-type") or ""):
            listen = Heard(s)
            m = listen.wait(LISTEN_WAIT_S, lambda m: True)
            if m and m.get("method") == "notifications/subscriptions/acknowledged":
                f["listen served"] = True
                f["listen acknowledged"] = m["params"].get("notifications")
            else:
                listen.close()
                listen = None
        else:
            f["listen"] = f"HTTP {s.status}"
            s.close()
    # A legacy session: initialize, initialized, one prompts/list, and the GET stream.
    init = {"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "lists_peers_e2e", "version": "1"}}}
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    r = wire.request(port, "POST", "/mcp", init, h)
    caps = r.first().get("result", {}).get("capabilities", {})
    f["legacy prompts"], f["legacy resources"] = caps.get("prompts"), caps.get("resources")
    sid = r.headers.get("mcp-session-id")
    f["legacy session"] = bool(sid)
    lh = {**h, "MCP-Protocol-Version": LEGACY, **({"Mcp-Session-Id": sid} if sid else {})}
    wire.request(port, "POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, lh)
    page = wire.request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 11, "method": "prompts/list"}, lh).response(11)
    f["legacy prompts/list items"] = len(page.get("result", {}).get("prompts", []))
    get = wire.Stream(port, "GET", "/mcp", None, {"Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY,
                                                 **({"Mcp-Session-Id": sid} if sid else {})})
    f["legacy GET"] = get.status
    legacy = Heard(get) if get.status == 200 else None
    if legacy is None:
        get.close()
    try:
        time.sleep(0.3)  # the GET stream registered at the server before the change
        on_listen = {k: count(listen, n) if listen else 0 for k, n in NOTIFICATION.items()}
        on_get = {k: count(legacy, n) if legacy else 0 for k, n in NOTIFICATION.items()}
        answer = remove(port, how == "announce")
        f[f"{how}: answer"] = {k: answer.get(k) for k in ("notified", "sessions_changed", "changed") if k in answer}
        f[f"{how}: on listen"] = arrived(listen, on_listen, how == "announce")
        f[f"{how}: on legacy GET"] = arrived(legacy, on_get, how == "announce" and listen is None)
    finally:
        for s in (listen, legacy):
            if s is not None:
                s.close()
    return f


def survey(args, work: Path) -> dict[str, dict]:
    """Every instance surveyed at once on instances of its own, which are stopped afterwards."""
    return e2e.survey_all(start_instances(list(INSTANCES), "-survey", args.node, args.node_path, work),
                          survey_instance, work)


def lc(cap) -> bool:
    return isinstance(cap, dict) and cap.get("listChanged") is True


ONE_EACH, NONE_EACH = {"prompts": 1, "resources": 1}, {"prompts": 0, "resources": 0}
# What the survey must find: the facts the expectations below rely on, per peer kind (the keys a
# kind's instance does not exercise are skipped: an announced instance has no "silent:" facts).
WIRE = {
    "py": {"modern served": True, "modern listChanged": (True, True), "ttlMs": (0, 0, 0), "listen served": True,
           "legacy listChanged": (False, False), "legacy GET": 200,
           "announce: on listen": ONE_EACH, "announce: on legacy GET": ONE_EACH,
           "silent: on listen": NONE_EACH, "silent: on legacy GET": NONE_EACH},
    "pynl": {"modern served": True, "modern listChanged": (False, False), "ttlMs": (0, 0, 0), "listen served": False,
             "legacy listChanged": (False, False), "legacy GET": 200, "silent: on legacy GET": NONE_EACH},
    "ts1": {"modern served": False, "legacy listChanged": (True, True), "legacy GET": 200,
            "announce: on legacy GET": ONE_EACH, "silent: on legacy GET": NONE_EACH},
    "ts2": {"modern served": True, "modern listChanged": (True, True), "ttlMs": (0, 0, 0), "listen served": True,
            "legacy listChanged": (True, True), "legacy GET": 405,
            "announce: on listen": ONE_EACH, "silent: on listen": NONE_EACH},
}


def check_wire(facts: dict[str, dict]) -> None:
    bad = []
    for name, f in facts.items():
        kind, how = INSTANCES[name]
        seen = {
            **f,
            "modern listChanged": (lc(f.get("modern prompts")), lc(f.get("modern resources"))),
            "legacy listChanged": (lc(f.get("legacy prompts")), lc(f.get("legacy resources"))),
            "ttlMs": tuple((f.get(f"modern {m}") or {}).get("ttlMs")
                           for m in ("prompts/list", "resources/list", "resources/templates/list")),
        }
        for key, value in WIRE[kind].items():
            if key.split(":")[0] in ("announce", "silent") and not key.startswith(how):
                continue
            if seen.get(key) != value:
                bad.append(f"{name}: {key} = {seen.get(key)!r}, expected {value!r}")
        if f.get("legacy prompts/list items") != 3:
            bad.append(f"{name}: legacy prompts/list listed {f.get('legacy prompts/list items')}, expected 3")
    if bad:
        raise Failure("the peers do not behave as this test's expectations assume:\n  " + "\n  ".join(bad))
    log("OK: every peer does on the wire what the expectations assume")


def promise(facts: dict[str, dict], target: str, list_: str) -> str:
    """The promise each era's contract derives from the survey: legacy, `announce` when the list's
    capability declares listChanged, else `none`; 2026-07-28, listChanged and ttlMs (all 0 here)."""
    peer, _version, era = TARGETS[target]
    f = next(v for k, v in facts.items() if INSTANCES[k][0] == INSTANCES[peer][0])
    cap = "prompts" if list_ == "prompts" else "resources"
    return "announce" if lc(f.get(f"{'modern' if era == 'modern' else 'legacy'} {cap}")) else "none"

# ---------------------------------------------------------------------------------------- the run


# Gauges written from the first time they are not 0 (docs/metrics.md): a list's drift by kind
# exists from the first audit that finds that kind.
FROM_FIRST_FINDING = {"mcp_probe_list_cache_drift_items"}


def conn(s: Snapshot, metric: str, t: str, **labels) -> float | None:
    """A series of connection 0. A counter (`_total`) reads 0 while absent: several are written
    from their first event (docs/metrics.md), as is a list's drift by kind; any other gauge must
    exist (None when it does not)."""
    v = s.value(metric, target=t, connection="0", **labels)
    absent_is_zero = metric.endswith("_total") or metric in FROM_FIRST_FINDING
    return 0.0 if v is None and absent_is_zero else v


def status_lists(s: Snapshot, t: str) -> dict | None:
    """connection 0's lists[] in /status.json by list, or None when this build has none there."""
    c = next((c for c in s.target(t)["connections"] if str(c["connection"]) == "0"), None)
    if c is None or "lists" not in c:
        return None
    return {entry["list"]: entry for entry in c["lists"]}


def main() -> int:
    args = e2e.arguments()
    work: Path = args.work
    bin_ = args.bin

    facts = survey(args, work)
    check_wire(facts)
    promises = {(t, l): promise(facts, t, l) for t in TARGETS for l in LISTS}

    ports = start_instances(list(INSTANCES) + list(PROXIED_PEERS), "", args.node, args.node_path, work)
    url = {name: f"http://127.0.0.1:{ports[name]}/mcp" for name in ports}
    # ---- pins of the silent peers, before anything is removed (the exporter's `pins:`, and `check --pins` at the end)
    pin_files = take_pins(bin_, work, url)
    exporter_port = free_port()
    proxy_port = {p: free_port() for p in PROXIES}
    config = work / "exporter.yml"
    config.write_text(f"global:\n  audit_interval: {AUDIT_S}s\n  ping_interval: 5s\n  request_timeout: 2s\n"
                      f"  notification_grace: {GRACE_S}s\ntargets:\n"
                      + "".join(f"  - name: {t}\n    url: {url[peer]}\n    protocol_version: {version}\n"
                                + (f"    pins: {pin_files[PINNED_TARGETS[t]]}\n" if t in PINNED_TARGETS else "")
                                for t, (peer, version, _era) in TARGETS.items())
                      + "proxies:\n"
                      + "".join(f"  - name: {p}\n    listen: 127.0.0.1:{proxy_port[p]}\n    upstream: {url[peer]}\n"
                                f"    catalog_refresh_interval: {CATALOG_S}s\n    cursor_grace: 5s\n"
                                f"    relist_grace: 5s\n"
                                for p, (peer, _announce) in PROXIES.items()))
    r = subprocess.run([bin_, "--config.check", f"--config.file={config}"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    base = f"http://127.0.0.1:{exporter_port}"
    start("exporter", [bin_, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{exporter_port}",
                       "--log.level=debug"], work)
    status_seen = {"lists[]": False}

    def expect(bad: list[str], what: str, got, want) -> None:
        ok = got is not None and (got >= want[1] if isinstance(want, tuple) else got == want)
        if not ok:
            bad.append(f"{what} = {got}, want {'>= ' + str(want[1]) if isinstance(want, tuple) else want}")

    def lists_state(bad: list[str], s: Snapshot, t: str, items: dict, drift: dict, stale: dict,
                    unannounced: dict) -> None:
        """Every list of target t: items in both views, drift by kind, the verdict, unannounced
        changes (a number, or (">=", n)); no TTL violation, no walk failure; /status.json alike."""
        st = status_lists(s, t)
        if st is not None:
            status_seen["lists[]"] = True
        for l in LISTS:
            lab = dict(list=l)
            for view in ("server", "cache"):
                expect(bad, f"{t} {l} items{{view={view}}}", conn(s, "mcp_probe_list_items", t, view=view, **lab), items[l])
            for kind in ("missing", "extra", "changed"):
                expect(bad, f"{t} {l} drift{{kind={kind}}}", conn(s, "mcp_probe_list_cache_drift_items", t, kind=kind, **lab),
                       drift[l] if kind == "extra" else 0)
            expect(bad, f"{t} {l} cache_stale", conn(s, "mcp_probe_list_cache_stale", t, **lab), stale[l])
            expect(bad, f"{t} {l} unannounced_changes_total",
                   conn(s, "mcp_probe_list_unannounced_changes_total", t, **lab), unannounced[l])
            expect(bad, f"{t} {l} ttl_violations_total", conn(s, "mcp_probe_list_ttl_violations_total", t, **lab), 0)
            fails = s.sum("mcp_probe_list_walk_failures_total", target=t, connection="0", **lab)
            if fails:
                bad.append(f"{t} {l} walk failures {fails}")
            if st is not None:
                e = st.get(l)
                if e is None:
                    bad.append(f"{t}: /status.json lists[] has no {l}")
                    continue
                want_promise = promises[(t, l)] if l != "resource_templates" else promises[(t, "resources")]
                got = (e.get("server"), e.get("cache"), len(e["drift"].get("extra", [])), e.get("stale"), e.get("promise"))
                want = (items[l], items[l], drift[l], bool(stale[l]), want_promise)
                if got != want:
                    bad.append(f"{t}: /status.json {l} (server, cache, extra, stale, promise) = {got}, want {want}")

    zero = {l: 0 for l in LISTS}

    def era_ok(bad: list[str], s: Snapshot, t: str) -> None:
        expect(bad, f"{t} up", s.value("mcp_probe_up", target=t), 1)
        want = TARGETS[t][2]
        info = next((ls for n, ls, v in s.samples if n == "mcp_probe_session_info" and ls.get("target") == t and v == 1), None)
        if not info or info.get("era") != want:
            bad.append(f"{t}: session_info {info}, want era={want}")

    def before(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in TARGETS:
            era_ok(bad, s, t)
            lists_state(bad, s, t, BEFORE, zero, zero, zero)
            expect(bad, f"{t} audits", conn(s, "mcp_probe_cache_consistency_checks_total", t), (">=", 1))
        return bad

    t_ready = time.monotonic()
    snap = wait_until(f"{len(TARGETS)} targets up in their era, every list walked (3 prompts, 3 resources, 1 template "
                      "in both views), drift 0, nothing unannounced, no TTL violation, not stale", 90, base, before)
    ready_s = time.monotonic() - t_ready
    if not status_seen["lists[]"]:
        raise Failure("/status.json has no connections[].lists[]")
    for t in TARGETS:
        log(f"  {t}: promise " + ", ".join(f"{l}={promises[(t, l)]}" for l in ("prompts", "resources"))
            + f"; notifications so far " + ", ".join(
                f"{l}={conn(snap, 'mcp_probe_list_notifications_total', t, list=l) or 0:.0f}" for l in LISTS))

    target_pins(base, snap, removed=False)

    # ---- silent removals: caught by the audit, judged by each target's contract
    silent = [t for t, (peer, _v, _e) in TARGETS.items() if INSTANCES[peer][1] == "silent"]
    for name, (_kind, how) in INSTANCES.items():
        if how == "silent":
            log(f"{name}: removed silently: {remove(ports[name], False)}")
    t_silent = time.monotonic()
    removed_drift = {"prompts": 1, "resources": 1, "resource_templates": 0}

    def stale_by_contract(t: str) -> dict:
        """Legacy: a difference is stale whatever was declared. 2026-07-28: stale only where a
        promise (listChanged; ttlMs is 0 here) was broken."""
        era = TARGETS[t][2]
        return {l: (0 if l == "resource_templates" else
                    1 if era == "legacy" or promises[(t, l)] != "none" else 0) for l in LISTS}

    def unannounced_want(t: str) -> dict:
        # Measured whatever the contract (the verdict reads it); a server promising nothing too.
        return {"prompts": (">=", 1), "resources": (">=", 1), "resource_templates": 0}

    def silent_seen(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in silent:
            era_ok(bad, s, t)
            items = {"prompts": BEFORE["prompts"], "resources": BEFORE["resources"], "resource_templates": 1}
            # The server view has lost the removed items; the cache (notification-driven) has not.
            for l in LISTS:
                expect(bad, f"{t} {l} items{{view=server}}", conn(s, "mcp_probe_list_items", t, list=l, view="server"), AFTER[l])
                expect(bad, f"{t} {l} items{{view=cache}}", conn(s, "mcp_probe_list_items", t, list=l, view="cache"), items[l])
                for kind in ("missing", "extra", "changed"):
                    expect(bad, f"{t} {l} drift{{kind={kind}}}",
                           conn(s, "mcp_probe_list_cache_drift_items", t, list=l, kind=kind),
                           removed_drift[l] if kind == "extra" else 0)
                expect(bad, f"{t} {l} cache_stale", conn(s, "mcp_probe_list_cache_stale", t, list=l), stale_by_contract(t)[l])
                expect(bad, f"{t} {l} unannounced_changes_total",
                       conn(s, "mcp_probe_list_unannounced_changes_total", t, list=l), unannounced_want(t)[l])
                expect(bad, f"{t} {l} ttl_violations_total", conn(s, "mcp_probe_list_ttl_violations_total", t, list=l), 0)
                if l != "resource_templates":
                    notes = conn(s, "mcp_probe_list_notifications_total", t, list=l) or 0
                    if notes:
                        bad.append(f"{t} {l}: {notes:.0f} list_changed counted for a silent removal")
            st = status_lists(s, t)
            if st is not None:
                for l in ("prompts", "resources"):
                    e = st.get(l) or {"drift": {}}
                    if REMOVED[l] not in e["drift"].get("extra", []) or bool(e.get("stale")) != bool(stale_by_contract(t)[l]):
                        bad.append(f"{t}: /status.json {l} drift.extra {e['drift'].get('extra')}, stale {e.get('stale')}; "
                                   f"want {REMOVED[l]!r} in extra, stale {bool(stale_by_contract(t)[l])}")
        return bad

    after_silent = wait_until("silent removals: prompts and resources drift extra=1 (templates untouched), unannounced "
                              ">= 1, stale by each target's contract (legacy always; 2026-07-28 where listChanged was "
                              "declared; never on pynl_modern_sil)", SILENT_DEADLINE_S, base, silent_seen)
    silent_s = time.monotonic() - t_silent
    target_pins(base, after_silent, removed=True)
    for t in silent:
        log(f"  {t}: stale " + ", ".join(f"{l}={conn(after_silent, 'mcp_probe_list_cache_stale', t, list=l):.0f}"
                                         for l in LISTS)
            + "; unannounced " + ", ".join(
                f"{l}={conn(after_silent, 'mcp_probe_list_unannounced_changes_total', t, list=l):.0f}" for l in LISTS))

    # ---- announced removals: followed (ts2_legacy_ann, with no channel, sees an unannounced one)
    announced = [t for t, (peer, _v, _e) in TARGETS.items() if INSTANCES[peer][1] == "announce" and t != "ts2_legacy_ann"]
    notes0 = {(t, l): conn(after_silent, "mcp_probe_list_notifications_total", t, list=l) or 0
              for t in announced for l in LISTS}
    for name, (_kind, how) in INSTANCES.items():
        if how == "announce":
            log(f"{name}: removed, announced: {remove(ports[name], True)}")
    t_announced = time.monotonic()

    def announced_followed(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in announced:
            era_ok(bad, s, t)
            lists_state(bad, s, t, AFTER, zero, zero, zero)
            # The resources notification announces both resource lists: each counts it.
            for l in LISTS:
                n = conn(s, "mcp_probe_list_notifications_total", t, list=l) or 0
                if n <= notes0[(t, l)]:
                    bad.append(f"{t} {l}: list_notifications_total still {n}")
        t = "ts2_legacy_ann"  # a legacy client of TS v2's stateless fallback: no GET stream
        era_ok(bad, s, t)
        for l in LISTS:
            expect(bad, f"{t} {l} items{{view=server}}", conn(s, "mcp_probe_list_items", t, list=l, view="server"), AFTER[l])
            expect(bad, f"{t} {l} drift{{kind=extra}}", conn(s, "mcp_probe_list_cache_drift_items", t, list=l, kind="extra"),
                   removed_drift[l])
            expect(bad, f"{t} {l} cache_stale", conn(s, "mcp_probe_list_cache_stale", t, list=l), stale_by_contract(t)[l])
            expect(bad, f"{t} {l} unannounced_changes_total",
                   conn(s, "mcp_probe_list_unannounced_changes_total", t, list=l), unannounced_want(t)[l])
        return bad

    after = wait_until("announced removals followed: list_changed counted per list, 2 prompts, 2 resources, 1 template "
                       "in both views, drift 0, nothing unannounced, not stale; ts2_legacy_ann (no GET stream) "
                       "unannounced and stale", SILENT_DEADLINE_S, base, announced_followed)
    announced_s = time.monotonic() - t_announced
    audits0 = {t: conn(after, "mcp_probe_cache_consistency_checks_total", t) or 0 for t in announced}

    def two_more_audits(s: Snapshot) -> list[str]:
        bad = announced_followed(s) + silent_seen(s)
        for t, n in audits0.items():
            now = conn(s, "mcp_probe_cache_consistency_checks_total", t) or 0
            if now < n + 2:
                bad.append(f"{t}: audits {now}, waiting for {n + 2}")
        return bad

    final = wait_until("every verdict holds two audits later", 30, base, two_more_audits)

    # ---- the rest of issue 26's done-when: change class, pins, proxy stale calls
    t_hooks = time.monotonic()
    change_class(base, final)
    check_pins(bin_, work, url, pin_files)
    t_proxy = time.monotonic()
    proxy_stale_calls(args, work, base, url, ports, proxy_port)
    proxy_s = time.monotonic() - t_proxy

    log(f"PASS: ready in {ready_s:.1f} s; silent removals judged {silent_s:.1f} s after them (audit {AUDIT_S} s + "
        f"grace {GRACE_S} s); announced ones followed in {announced_s:.1f} s; change class and pins "
        f"{t_proxy - t_hooks:.1f} s; proxy stale calls {proxy_s:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------- change class

CHANGES = ("added", "removed", "breaking", "compatible", "unknown")
CHANGES_FAMILY = "mcp_probe_list_changes_total"


def change_class(base: str, snap: Snapshot) -> None:
    """The removals by class, on every target and connection: `removed` = 1 for prompts and for
    resources (the only change since the start), every other class 0 or absent, and nothing for
    resource_templates."""

    def removed_once(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in TARGETS:
            conns = sorted({ls["connection"] for n, ls, _v in s.samples
                            if n == "mcp_probe_list_items" and ls.get("target") == t})
            if not conns:
                bad.append(f"{t}: no connection in mcp_probe_list_items")
            for c in conns:
                for l in LISTS:
                    for change in CHANGES:
                        want = 1 if change == "removed" and l != "resource_templates" else 0
                        got = s.value(CHANGES_FAMILY, target=t, connection=c, list=l, change=change)
                        if (got or 0) != want:
                            bad.append(f"{t} connection {c}: {CHANGES_FAMILY}{{list={l},change={change}}} = {got}, "
                                       f"want {want}{' (or absent)' if not want else ''}")
        odd = {ls.get("change") for n, ls, _v in s.samples if n == CHANGES_FAMILY} - set(CHANGES)
        if odd:
            bad.append(f"{CHANGES_FAMILY}: change label values {sorted(odd)} outside {CHANGES}")
        return bad

    wait_until(f"change class: {CHANGES_FAMILY}{{change=removed}} = 1 for prompts and for resources on every "
               "connection of every target, nothing else, nothing for resource_templates", 10, base, removed_once)

# ---------------------------------------------------------------------------------------- pins


def pin_version(version: str | None) -> list[str]:
    return ["--protocol-version", version] if version else []


def pin(bin_: str, url: str, version: str | None, path: Path, removed: bool) -> None:
    """`mcp_exporter pin URL > path`; the file must pin every list by its key, the catalog's names
    (without the removed two when `removed`)."""
    r = subprocess.run([bin_, "pin", *pin_version(version), url], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise Failure(f"pin {url} ({version or 'auto'}) exited {r.returncode}: {r.stderr[-2000:]}")
    path.write_text(r.stdout)
    doc = json.loads(r.stdout)
    for section, (key, names) in PIN_SECTIONS.items():
        want = names - ({REMOVED["prompts"], REMOVED["resources"]} if removed else set())
        got = {item.get(key) for item in doc.get(section, [])}
        if got != want:
            raise Failure(f"pin {url} ({version or 'auto'}) > {path}: section {section!r} pins {sorted(got)}, want {sorted(want)}")


def take_pins(bin_: str, work: Path, url: dict) -> dict[str, Path]:
    """Pins each PINS instance (its era) before the removal: tools, prompts, resources, templates."""
    files = {label: work / f"pins-{label}.json" for label in PINS}
    with concurrent.futures.ThreadPoolExecutor(len(PINS)) as ex:
        for f in [ex.submit(pin, bin_, url[peer], version, files[label], False) for label, (peer, version) in PINS.items()]:
            f.result(timeout=90)
    which = ", ".join(f"{label} ({peer}, {version or 'auto'})" for label, (peer, version) in PINS.items())
    log(f"pinned before the removals: {which}: sections tools, prompts, resources, resource_templates (1/3/3/1)")
    return files


PIN_FAMILY = "mcp_probe_list_pin_mismatches"


def target_pins(base: str, snap: Snapshot, removed: bool) -> None:
    """The targets with `pins:` (PINNED_TARGETS): per list, pinned items changed or not listed
    (`mcp_probe_list_pin_mismatches`) are 0 before the removal and 1 for prompts and for resources
    after it (templates 0), no unpinned item, the tool kb_stats matching its pin."""

    def judged(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in PINNED_TARGETS:
            for l in LISTS:
                want = 1 if removed and l != "resource_templates" else 0
                for family, w in ((PIN_FAMILY, want), ("mcp_probe_list_unpinned_items", 0)):
                    got = s.value(family, target=t, list=l)
                    if got != w:
                        bad.append(f"{t}: {family}{{list={l}}} = {got}, want {w}")
            got = s.value("mcp_probe_tool_pin_mismatch", target=t, tool="kb_stats")
            if got != 0:
                bad.append(f"{t}: mcp_probe_tool_pin_mismatch{{tool=kb_stats}} = {got}, want 0")
        return bad

    wait_until(f"targets with `pins:` ({', '.join(PINNED_TARGETS)}): {PIN_FAMILY} "
               + ("1 for prompts and for resources, 0 for templates, after the removal" if removed
                  else "0 for every list before the removal") + "; no unpinned item; kb_stats as pinned",
               10, base, judged)


def check_with_pins(bin_: str, url: str, version: str | None, pins: Path, out: Path) -> tuple[int, dict]:
    r = subprocess.run([bin_, "check", "--format", "json", "--pins", str(pins), *pin_version(version), url],
                       capture_output=True, text=True, timeout=90)
    out.write_text(r.stdout + r.stderr)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise Failure(f"check --pins {pins} {url}: exit {r.returncode}, no JSON report: {r.stdout[-1000:]}{r.stderr[-1000:]}") from None
    return r.returncode, doc


def check_pins(bin_: str, work: Path, url: dict, files: dict[str, Path]) -> None:
    """After the removals: `check --pins` exits 1 with prompts_pins and resources_pins failing
    on the removed two as "pinned, not listed" (and nothing else failing); a fresh pin passes."""
    pin_rows = ("pins", "prompts_pins", "resources_pins", "resource_templates_pins")

    def one(label: str) -> str:
        peer, version = PINS[label]
        rc, doc = check_with_pins(bin_, url[peer], version, files[label], work / f"check-pins-{label}.json")
        rows = {c["id"]: c for c in doc.get("checks", [])}
        problems = []
        if rc != 1 or doc.get("exit_code") != 1:
            problems.append(f"exit {rc} (report: {doc.get('exit_code')}), want 1")
        want = {"pins": ("pass", None), "resource_templates_pins": ("pass", None),
                "prompts_pins": ("fail", f"{REMOVED['prompts']} (pinned, not listed)"),
                "resources_pins": ("fail", f"\"{REMOVED['resources']}\" (pinned, not listed)")}
        for row, (status, words) in want.items():
            got = rows.get(row)
            if got is None or got["status"] != status or (words and words not in got["detail"]) or \
                    (words and "not pinned" in got["detail"]):
                problems.append(f"row {row} = {got}, want {status}" + (f" naming {words!r} only" if words else ""))
        failing = sorted(i for i, c in rows.items() if c["status"] in ("fail", "error"))
        if failing != ["prompts_pins", "resources_pins"]:
            problems.append(f"failing rows {failing}, want only prompts_pins and resources_pins")
        fresh = work / f"pins-{label}-fresh.json"
        pin(bin_, url[peer], version, fresh, True)
        rc2, doc2 = check_with_pins(bin_, url[peer], version, fresh, work / f"check-pins-{label}-fresh.json")
        rows2 = {c["id"]: c["status"] for c in doc2.get("checks", [])}
        if rc2 != 0 or any(rows2.get(r) != "pass" for r in pin_rows):
            problems.append(f"with a fresh pin: exit {rc2}, rows {[(r, rows2.get(r)) for r in pin_rows]}, want 0, all pass")
        if problems:
            raise Failure(f"pins {label} ({url[peer]}, {version or 'auto'}):\n    " + "\n    ".join(problems))
        return (f"{label}: exit 1, {rows['prompts_pins']['detail'].split(';')[0]}; "
                f"{rows['resources_pins']['detail'].split(';')[0]}; fresh pin exit 0")

    with concurrent.futures.ThreadPoolExecutor(len(PINS)) as ex:
        results = [f.result(timeout=200) for f in [ex.submit(one, label) for label in PINS]]
    for line in results:
        log(f"  pins {line}")
    log("OK: pins: `check --pins` fails on the removed prompt and resource (pinned, not listed) for "
        f"{', '.join(PINS)}, and passes with a fresh pin")

# ---------------------------------------------------------------------------------------- proxy


# client label -> (mode, era) for each proxy; the modern one only in front of the dual-era peer
PROXY_CLIENTS = {"px_py": {"cached": ("cached", "legacy"), "relist": ("relist", "legacy"),
                           "cached-modern": ("cached", "modern")},
                 "px_ts1": {"cached": ("cached", "legacy"), "relist": ("relist", "legacy")}}


def proxy_stale_calls(args, work: Path, base: str, url: dict, ports: dict, proxy_port: dict) -> None:
    """Real SDK clients (py_lists_client.py) through each proxy: `cached` ones use the removed
    prompt and resource from their listing, `relist` ones re-list and use kept items. Asserts
    mcp_proxy_stale_list_calls_total per proxy, client and list."""
    def catalog(s: Snapshot, want: dict) -> list[str]:
        bad = []
        for p in PROXIES:
            if s.value("mcp_proxy_upstream_up", proxy=p) != 1:
                bad.append(f"{p}: mcp_proxy_upstream_up = {s.value('mcp_proxy_upstream_up', proxy=p)}")
            for l, n in want.items():
                got = s.value("mcp_proxy_upstream_list_items", proxy=p, list=l)
                if got != n:
                    bad.append(f"{p}: mcp_proxy_upstream_list_items{{list={l}}} = {got}, want {n}")
        return bad

    wait_until("each proxy's catalog walked its upstream (3 prompts, 3 resources, 1 template)", 30, base,
               lambda s: catalog(s, BEFORE), may_exit=("pxclient-",))
    clients: dict[tuple[str, str], tuple[subprocess.Popen, Path, Path]] = {}
    for p, modes in PROXY_CLIENTS.items():
        for name, (mode, era) in modes.items():
            go = work / f"go-{p}-{name}"
            go.unlink(missing_ok=True)
            tag = f"pxclient-{p}-{name}"
            proc = start(tag, [sys.executable, str(e2e.PEERS / "py_lists_client.py"),
                               f"http://127.0.0.1:{proxy_port[p]}/mcp", "--name", name, "--mode", mode,
                               "--era", era, "--go", str(go), "--timeout", "40"], work)
            clients[(p, name)] = (proc, work / f"{tag}.log", go)

    def lines(key, kind: str) -> list[str]:
        return [ln[len(kind) + 1:] for ln in clients[key][1].read_text(errors="replace").splitlines()
                if ln.startswith(kind + " ")]

    def wait(kind: str, keys: list, seconds: float) -> dict:
        deadline = time.monotonic() + seconds
        got: dict = {}
        while time.monotonic() < deadline and len(got) < len(keys):
            for key in keys:
                if key in got:
                    continue
                found = lines(key, kind)
                if found:
                    got[key] = json.loads(found[-1])
                elif lines(key, "error") or clients[key][0].poll() not in (None, 0):
                    raise Failure(f"client {key} failed:\n{clients[key][1].read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        if len(got) < len(keys):
            raise Failure(f"clients without `{kind}` within {seconds:.0f} s: {sorted(set(keys) - set(got))}")
        return got

    keys = list(clients)
    wait("ready", keys, 40)
    log(f"proxy: {len(keys)} SDK clients listed through the proxies: {', '.join(f'{p}/{n}' for p, n in keys)}")
    for p, (peer, announce) in PROXIES.items():
        log(f"{peer} (behind {p}): removed, {'announced' if announce else 'silently'}: {remove(ports[peer], announce)}")
    # The catalog must know the removal before it can call a use stale: a passing list_changed
    # (px_py) or its interval (px_ts1, silent).
    wait_until(f"each proxy's catalog has the removal (2 prompts, 2 resources, 1 template; interval {CATALOG_S} s)",
               CATALOG_S + 15, base, lambda s: catalog(s, AFTER), may_exit=("pxclient-",))
    relist = [k for k in keys if PROXY_CLIENTS[k[0]][k[1]][0] == "relist"]
    cached = [k for k in keys if k not in relist]
    for k in relist:
        clients[k][2].write_text("go\n")
    results = wait("result", relist, 20)
    for k in cached:
        clients[k][2].write_text("go\n")
    results.update(wait("result", cached, 20))
    for (p, name), r in sorted(results.items()):
        uses = {k: v for k, v in r.items() if k.startswith("kb")}
        log(f"  {p}/{name} ({r['protocol_version']}): {json.dumps(uses)}; list_changed heard {r['list_changed_heard']}")
    bad = [f"{k}: the server answered {REMOVED[l]} without an error: {results[k][REMOVED[l]]}"
           for k in cached for l in REMOVED if not results[k][REMOVED[l]][0]]
    if bad:
        raise Failure("the removed items are still served:\n  " + "\n  ".join(bad))

    def stale_counted(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for p, name in cached:
            for l in ("prompts", "resources"):
                got = s.value("mcp_proxy_stale_list_calls_total", proxy=p, client=name, list=l)
                if got is None or got < 1:
                    bad.append(f"{p}: mcp_proxy_stale_list_calls_total{{client={name},list={l}}} = {got}, want >= 1")
            got = s.sum("mcp_proxy_stale_list_calls_total", proxy=p, client=name, list="resource_templates")
            if got:
                bad.append(f"{p}: stale_list_calls_total{{client={name},list=resource_templates}} = {got}, want none")
        for p, name in relist:
            got = s.sum("mcp_proxy_stale_list_calls_total", proxy=p, client=name)
            if got:
                bad.append(f"{p}: mcp_proxy_stale_list_calls_total{{client={name}}} = {got} for a client that re-listed")
        return bad

    s = wait_until("proxy: the cached clients' prompts/get and resources/read of the removed items counted as stale "
                   "calls (list=prompts, list=resources), per proxy and client; the re-listing clients not", 10, base,
                   stale_counted, may_exit=("pxclient-",))
    log("  " + "; ".join(f"{p}/{n}: " + ", ".join(
        f"{l}={s.value('mcp_proxy_stale_list_calls_total', proxy=p, client=n, list=l) or 0:.0f}"
        for l in ("prompts", "resources")) for p, n in keys))
    deadline = time.monotonic() + 20
    for key in keys:
        proc = clients[key][0]
        try:
            rc = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise Failure(f"client {key} did not exit within 20 s") from None
        if rc != 0:
            raise Failure(f"client {key} exited {rc}:\n{clients[key][1].read_text(errors='replace')[-3000:]}")

if __name__ == "__main__":
    e2e.run(main)
