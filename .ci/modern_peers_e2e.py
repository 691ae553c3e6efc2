"""The exporter against real 2026-07-28 (modern era) SDK servers: Python `mcp` 2.3, TypeScript SDK v2;
and against the legacy-only transports: HTTP+SSE (2024-11-05) and stdio.

Run by .ci/sdk_peers_e2e.sh after the legacy peers (same install) with the venv's python:

    python modern_peers_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

Why a second file: the legacy run (sdk_peers_e2e.py) proves list_changed on the GET stream; this one
proves the modern era's discovery, `subscriptions/listen`, ttlMs/cacheScope and era fallback against
the same catalog (14 tools, 8 per page). The process, polling and parsing helpers are the legacy
run's, imported, not copied.

1. starts eight peers, on free loopback ports, each twice (one to swap announced, one unannounced):
   py_modern_server.py, ts2_server.mjs, and the HTTP+SSE py_sse_server.py (Python SseServerTransport)
   and ts_sse_server.mjs (TypeScript SDK 1.32 SSEServerTransport);
2. `EXPORTER_BIN check URL` must exit 0 against both healthy modern peers (auto: era modern) and
   against the Python peer pinned `--protocol-version 2025-11-25` (its legacy side has sessions);
   against the TypeScript v2 peer pinned 2025-11-25 it exits 0 with a WARN on the GET 405;
   `check --transport sse URL` against both SSE peers and `check -- PYTHON py_stdio_server.py` exit 0;
3. starts the exporter (audit every 2 s, grace 3 s, --log.level=debug) with thirteen targets:
     py_announced, py_unannounced, ts_announced, ts_unannounced   protocol_version auto
     py_legacy  (py announced peer, pinned 2025-11-25)             legacy sessions + GET stream
     ts_legacy  (ts announced peer, pinned 2025-11-25)             the SDK's stateless fallback, GET 405
     pysse_announced, pysse_unannounced, tssse_announced, tssse_unannounced   transport sse, URL /sse
     tssse_auto (the TS SSE announced peer's /sse, transport auto) the initialize POST gets 404: SSE
     stdio_announced, stdio_unannounced  command: py_stdio_server.py --swap-after 12 [--unannounced]
   and waits until: every modern target has `session_info{era="modern",protocol_version="2026-07-28"}`,
   pages 2, tools 14, drift 0, stream up, ttl 60 s, cacheScope public; py_legacy is era legacy with
   its stream up; ts_legacy is era legacy, listChanged declared, stream down; the SSE, stdio and
   auto targets are era legacy, pages 2, tools 14, stream up (their one channel), nothing heard yet;
4. swaps each peer's list (search_legacy -> search_v2) through its /admin/change, announced on two,
   silent on two, and waits for: announced -> list_changed counted, cache re-listed, drift 0, no
   unannounced change, stream up, no TTL violation (py_legacy too, over its GET stream); unannounced
   -> drift extra=1 missing=1, unannounced >= 1 and a TTL violation (the swap broke a 60 s
   promise) within one audit + grace (+ slack for scrapes); ts_legacy, a legacy client of a
   modern server, never hears of the announced change: it shows it as an unannounced one. The SSE
   and stdio targets the same, without TTLs (legacy listings promise none); the stdio peers swap
   themselves 12 s after their start (a pipe has no admin endpoint), so stdio_unannounced has a
   deadline of its own, counted from then.

Every wait has a deadline; every child is killed on exit; on failure the logs are printed.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import sdk_peers_e2e as e2e
from sdk_peers_e2e import Failure, Snapshot, free_port, http, log, start, wait_port, wait_until

e2e.TAG = "modern_peers"
AUDIT_S, GRACE_S = 2, 3
# One audit plus the grace, plus the time an audit walk and our polling take on a loaded runner.
UNANNOUNCED_DEADLINE_S = AUDIT_S + GRACE_S + 15
MODERN = ["py_announced", "py_unannounced", "ts_announced", "ts_unannounced"]
# The legacy-only transports: HTTP+SSE (2024-11-05; swapped through /admin/change like the modern
# peers) and stdio (the exporter starts the peer; it swaps itself STDIO_SWAP_S after its start).
SSE = ["pysse_announced", "pysse_unannounced", "tssse_announced", "tssse_unannounced"]
STDIO = ["stdio_announced", "stdio_unannounced"]
STDIO_SWAP_S = 12
# transport auto on the TS SSE peer's /sse URL: the initialize POST is refused (404), so SSE.
SSE_AUTO = "tssse_auto"
LEGACY_TRANSPORTS = [*SSE, *STDIO, SSE_AUTO]
ANNOUNCED = ["py_announced", "ts_announced", "py_legacy", "pysse_announced", "tssse_announced",
             "stdio_announced", SSE_AUTO]
UNANNOUNCED = ["py_unannounced", "ts_unannounced"]
UNANNOUNCED_SSE = ["pysse_unannounced", "tssse_unannounced"]


def run_check(bin_: str, work: Path, name: str, argv: list[str]) -> subprocess.CompletedProcess:
    t = time.monotonic()
    r = subprocess.run([bin_, "check", *argv], capture_output=True, text=True, timeout=90)
    (work / f"check-{name}.txt").write_text(r.stdout + r.stderr)
    log(f"check {name} ({' '.join(argv)}): exit {r.returncode} in {time.monotonic() - t:.1f} s")
    return r


def main() -> int:
    args = e2e.arguments()
    work: Path = args.work
    py, bin_ = sys.executable, args.bin

    peers = {  # peer -> argv without the port
        "py_announced": [py, str(e2e.PEERS / "py_modern_server.py")],
        "py_unannounced": [py, str(e2e.PEERS / "py_modern_server.py")],
        "ts_announced": [args.node, str(e2e.PEERS / "ts2_server.mjs")],
        "ts_unannounced": [args.node, str(e2e.PEERS / "ts2_server.mjs")],
        "pysse_announced": [py, str(e2e.PEERS / "py_sse_server.py")],
        "pysse_unannounced": [py, str(e2e.PEERS / "py_sse_server.py")],
        "tssse_announced": [args.node, str(e2e.PEERS / "ts_sse_server.mjs")],
        "tssse_unannounced": [args.node, str(e2e.PEERS / "ts_sse_server.mjs")],
    }
    ports = {name: free_port() for name in [*peers, "exporter"]}
    url = {name: f"http://127.0.0.1:{ports[name]}/{'sse' if name in SSE else 'mcp'}" for name in peers}
    stdio = [py, str(e2e.PEERS / "py_stdio_server.py")]
    procs = {name: start(name, [*argv, str(ports[name])], work, env={"NODE_PATH": args.node_path})
             for name, argv in peers.items()}
    for name in peers:
        wait_port(name, ports[name], procs[name], 60)

    # ---- one-shot `check`
    checks = {}
    for name, argv in [("py_modern", [url["py_announced"]]), ("ts2_modern", [url["ts_announced"]]),
                       ("py_pinned_2025-11-25", ["--protocol-version", "2025-11-25", url["py_announced"]])]:
        r = run_check(bin_, work, name, argv)
        if r.returncode != 0:
            print(r.stdout, r.stderr, sep="\n", file=sys.stderr)
            raise Failure(f"mcp_exporter check {' '.join(argv)} exited {r.returncode}, want 0")
        if name.endswith("_modern") and "2026-07-28" not in r.stdout:
            raise Failure(f"check {name} did not settle on 2026-07-28:\n{r.stdout}")
        checks[name] = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
    # The TS v2 peer's legacy side is the SDK's stateless fallback: listChanged declared, GET 405.
    # A client can still use it (exit 0), and check warns that it never hears a change (F3).
    argv = ["--protocol-version", "2025-11-25", url["ts_announced"]]
    r = run_check(bin_, work, "ts2_pinned_2025-11-25", argv)
    stream_row = next((line.strip() for line in r.stdout.splitlines() if "notification_stream" in line), "(no row)")
    if r.returncode != 0 or not (stream_row.startswith("WARN") and "405" in stream_row):
        print(r.stdout, r.stderr, sep="\n", file=sys.stderr)
        raise Failure(f"mcp_exporter check {' '.join(argv)}: exit {r.returncode}, notification_stream row "
                      f"{stream_row!r}; want exit 0 and a WARN naming the GET 405")
    checks["ts2_pinned_2025-11-25"] = f"exit 0; {stream_row}"
    # The same finding from the modern side: --legacy-clients asks what a 2025 client hears.
    # Without --listen-for nothing changes while check runs: a legacy path that declares
    # listChanged and opens a GET stream is untested (INFO); the TS v2 fallback refuses GET (WARN).
    for name, peer, want in [("py_legacy_clients", "py_announced", "INFO"),
                             ("ts2_legacy_clients", "ts_announced", "WARN")]:
        r = run_check(bin_, work, name, ["--legacy-clients", url[peer]])
        row = next((line.strip() for line in r.stdout.splitlines() if "legacy_clients" in line), "(no row)")
        if r.returncode != 0 or not row.startswith(want):
            print(r.stdout, r.stderr, sep="\n", file=sys.stderr)
            raise Failure(f"mcp_exporter check --legacy-clients {url[peer]}: exit {r.returncode}, "
                          f"legacy_clients row {row!r}; want exit 0 and {want}")
        checks[name] = f"exit 0; {row}"
    # The legacy-only transports: HTTP+SSE named explicitly, and a stdio server after `--`.
    for name, argv in [("py_sse", ["--transport", "sse", url["pysse_announced"]]),
                       ("ts_sse", ["--transport", "sse", url["tssse_announced"]]),
                       ("py_stdio", ["--", *stdio])]:
        r = run_check(bin_, work, name, argv)
        if r.returncode != 0:
            print(r.stdout, r.stderr, sep="\n", file=sys.stderr)
            raise Failure(f"mcp_exporter check {' '.join(argv)} exited {r.returncode}, want 0")
        checks[name] = (r.stdout.strip().splitlines() or ["(no output)"])[-1]

    # ---- the exporter
    targets = {  # name -> the target's keys besides its probe
        **{t: {"url": url[t], "protocol_version": "auto"} for t in MODERN},
        "py_legacy": {"url": url["py_announced"], "protocol_version": "2025-11-25"},
        "ts_legacy": {"url": url["ts_announced"], "protocol_version": "2025-11-25"},
        **{t: {"url": url[t], "transport": "sse"} for t in SSE},
        SSE_AUTO: {"url": url["tssse_announced"], "transport": "auto"},
        **{t: {"command": stdio[0], "args": json.dumps(
            [*stdio[1:], "--swap-after", str(STDIO_SWAP_S), *(["--unannounced"] if "unannounced" in t else [])])}
           for t in STDIO},
    }
    config = work / "exporter.yml"
    config.write_text(f"global:\n  audit_interval: {AUDIT_S}s\n  ping_interval: 5s\n  request_timeout: 2s\n"
                      f"  notification_grace: {GRACE_S}s\ntargets:\n"
                      + "".join(f"  - name: {t}\n" + "".join(f"    {k}: {v}\n" for k, v in keys.items())
                                + f"    probes:\n      - {{tool: kb_stats, interval: 2s, timeout: 2s, expect: {{text_contains: \"ok\"}}}}\n"
                                for t, keys in targets.items()))
    r = subprocess.run([bin_, "--config.check", f"--config.file={config}"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    base = f"http://127.0.0.1:{ports['exporter']}"
    start("exporter", [bin_, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{ports['exporter']}",
                       "--log.level=debug"], work)
    t_exporter = time.monotonic()

    def conn(s: Snapshot, metric: str, t: str, **labels) -> float | None:
        return s.value(metric, target=t, connection="0", **labels)

    def session(s: Snapshot, t: str) -> dict | None:
        for n, ls, v in s.samples:
            if n == "mcp_probe_session_info" and ls.get("target") == t and v == 1:
                return ls
        return None

    def expect_all(bad: list[str], t: str, s: Snapshot, want: dict) -> None:
        for key, v in want.items():
            metric, *kind = key.split(":")
            got = (s.sum(metric, target=t, connection="0") if kind == ["sum"] else conn(s, metric, t))
            ok = got is not None and (got >= v[1] if isinstance(v, tuple) else got == v)
            if not ok:
                bad.append(f"{t}: {metric} = {got}, want {'>= ' + str(v[1]) if isinstance(v, tuple) else v}")

    def era(bad: list[str], s: Snapshot, t: str, want_era: str, want_version: str) -> None:
        info = session(s, t)
        if not info or (info.get("era"), info.get("protocol_version")) != (want_era, want_version):
            bad.append(f"{t}: session_info {info}, want era={want_era} protocol_version={want_version}")

    listed = {"mcp_probe_connection_up": 1, "mcp_probe_tools_list_pages": 2, "mcp_probe_list_changed_capable": 1,
              "mcp_probe_tools_list_cursor_errors_total:sum": 0, "mcp_probe_cache_consistency_checks_total": (">=", 1)}
    clean = {"mcp_probe_cache_drift_tools:sum": 0, "mcp_probe_unannounced_changes_total:sum": 0,
             "mcp_probe_ttl_violations_total:sum": 0}

    def tools(bad: list[str], s: Snapshot, t: str) -> None:
        for view in ("server", "cache"):
            got = conn(s, "mcp_probe_tools", t, view=view)
            if got != 14:
                bad.append(f"{t}: mcp_probe_tools{{view={view}}} = {got}, want 14")

    def before(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in targets:
            expect_all(bad, t, s, {**listed, **clean})
            tools(bad, s, t)
            if s.value("mcp_probe_up", target=t) != 1:
                bad.append(f"{t}: mcp_probe_up = {s.value('mcp_probe_up', target=t)}, want 1")
            if s.value("mcp_probe_tool_probe_success", target=t, tool="kb_stats") != 1:
                bad.append(f"{t}: kb_stats probe not passing")
        for t in MODERN:
            era(bad, s, t, "modern", "2026-07-28")
            expect_all(bad, t, s, {"mcp_probe_notification_stream_up": 1, "mcp_probe_tools_list_ttl_seconds": 60,
                                   "mcp_probe_tools_list_cache_public": 1,
                                   "mcp_probe_tools_list_cache_scope_mixed_total:sum": 0})
        era(bad, s, "py_legacy", "legacy", "2025-11-25")
        expect_all(bad, "py_legacy", s, {"mcp_probe_notification_stream_up": 1})
        # A legacy client of the TS v2 server: listChanged declared, but the stateless fallback
        # answers GET with 405, so there is no channel the change could come on.
        era(bad, s, "ts_legacy", "legacy", "2025-11-25")
        expect_all(bad, "ts_legacy", s, {"mcp_probe_notification_stream_up": 0})
        # HTTP+SSE and stdio: the legacy era, notifications on the session's one channel. Nothing
        # heard yet: the stdio peers swap themselves, so this also proves the snapshot precedes it.
        for t in LEGACY_TRANSPORTS:
            info = session(s, t)
            if not info or info.get("era") != "legacy":
                bad.append(f"{t}: session_info {info}, want era=legacy")
            expect_all(bad, t, s, {"mcp_probe_notification_stream_up": 1})
            if (conn(s, "mcp_probe_list_changed_notifications_total", t) or 0) != 0:
                bad.append(f"{t}: list_changed already heard before the swap")
        return bad

    t_ready = time.monotonic()
    snap = wait_until(f"{len(targets)} targets up; modern ones era modern 2026-07-28, pages 2, tools 14, stream up, "
                      "ttl 60 s, public, drift 0; py_legacy stream up; ts_legacy era legacy, stream down; SSE, stdio "
                      "and auto->SSE targets era legacy, pages 2, tools 14, stream up, drift 0, nothing heard yet",
                      90, base, before)
    if time.monotonic() - t_exporter >= STDIO_SWAP_S:
        log(f"  note: ready {time.monotonic() - t_exporter:.1f} s after the exporter started, the stdio peers swap "
            f"{STDIO_SWAP_S} s after theirs (the snapshot shows no swap heard yet)")
    sessions = {t: {k: (session(snap, t) or {}).get(k) for k in ("protocol_version", "server_name")}
                for t in LEGACY_TRANSPORTS}
    log(f"  legacy transports' sessions: {sessions}")
    ready_s = time.monotonic() - t_ready
    ts_legacy_before = {k: conn(snap, k, "ts_legacy") for k in
                        ("mcp_probe_list_changed_capable", "mcp_probe_notification_stream_up")}
    log(f"  ts_legacy before the swap: {ts_legacy_before}; status.json: severity "
        f"{snap.target('ts_legacy').get('severity')}, causes {snap.target('ts_legacy').get('causes')}")

    # ---- the swaps
    lc0 = {t: conn(snap, "mcp_probe_list_changed_notifications_total", t) or 0 for t in ANNOUNCED}
    rf0 = {t: snap.sum("mcp_probe_cache_refreshes_total", target=t, connection="0", trigger="notification")
           for t in ANNOUNCED}
    for peer in peers:
        announce = "1" if peer.endswith("_announced") else "0"
        answer = json.loads(http("POST", f"http://127.0.0.1:{ports[peer]}/admin/change?announce={announce}"))
        if "search_v2" not in answer["tools"]:
            raise Failure(f"{peer} /admin/change did not swap in search_v2: {answer}")
        log(f"{peer}: swapped search_legacy -> search_v2, announce={announce}, notified {answer.get('notified')}")
    t_swap = time.monotonic()

    def announced_followed(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in ANNOUNCED:
            expect_all(bad, t, s, {**listed, **clean, "mcp_probe_notification_stream_up": 1})
            tools(bad, s, t)
            lc = conn(s, "mcp_probe_list_changed_notifications_total", t) or 0
            rf = s.sum("mcp_probe_cache_refreshes_total", target=t, connection="0", trigger="notification")
            if lc <= lc0[t]:
                bad.append(f"{t}: list_changed_notifications_total still {lc}")
            if rf <= rf0[t]:
                bad.append(f"{t}: no notification-triggered cache refresh yet ({rf})")
        return bad

    def drifted(bad: list[str], s: Snapshot, t: str) -> None:
        for kind in ("extra", "missing"):
            got = conn(s, "mcp_probe_cache_drift_tools", t, kind=kind)
            if got != 1:
                bad.append(f"{t}: cache_drift_tools{{kind={kind}}} = {got}, want 1")
        expect_all(bad, t, s, {"mcp_probe_unannounced_changes_total:sum": (">=", 1)})

    def unannounced_seen(s: Snapshot) -> list[str]:
        bad: list[str] = []
        for t in [*UNANNOUNCED, "ts_legacy", *UNANNOUNCED_SSE]:
            drifted(bad, s, t)
        for t in UNANNOUNCED:
            expect_all(bad, t, s, {"mcp_probe_notification_stream_up": 1, "mcp_probe_ttl_violations_total:sum": (">=", 1)})
        for t in UNANNOUNCED_SSE:  # legacy listings promise no TTL: no violation to expect
            expect_all(bad, t, s, {"mcp_probe_notification_stream_up": 1, "mcp_probe_connection_up": 1})
        return bad

    def stdio_unannounced_seen(s: Snapshot) -> list[str]:
        bad: list[str] = []
        drifted(bad, s, "stdio_unannounced")
        expect_all(bad, "stdio_unannounced", s, {"mcp_probe_notification_stream_up": 1, "mcp_probe_connection_up": 1})
        return bad

    wait_until(f"unannounced swaps: drift extra=1 missing=1, unannounced >= 1, a TTL violation, on "
               f"{', '.join(UNANNOUNCED)}; the same without a TTL on {', '.join(UNANNOUNCED_SSE)}; and on "
               f"ts_legacy (announced swap it could not hear)",
               UNANNOUNCED_DEADLINE_S, base, unannounced_seen)
    unannounced_s = time.monotonic() - t_swap
    # The stdio peers swap themselves STDIO_SWAP_S after the exporter started them (later if it had
    # to restart them): the same deadline, counted from then.
    stdio_late = max(0.0, t_exporter + STDIO_SWAP_S - time.monotonic())
    wait_until("stdio_unannounced (its own timed swap): drift extra=1 missing=1, unannounced >= 1, stream up",
               stdio_late + UNANNOUNCED_DEADLINE_S, base, stdio_unannounced_seen)
    stdio_s = time.monotonic() - t_exporter - STDIO_SWAP_S
    after = wait_until("announced swaps followed: list_changed counted, re-listed, drift 0, no unannounced change, "
                       "no TTL violation, stream up", 30, base, announced_followed)
    audits0 = {t: conn(after, "mcp_probe_cache_consistency_checks_total", t) or 0 for t in ANNOUNCED}

    def two_more_audits(s: Snapshot) -> list[str]:
        bad = announced_followed(s)
        for t, n in audits0.items():
            now = conn(s, "mcp_probe_cache_consistency_checks_total", t) or 0
            if now < n + 2:
                bad.append(f"{t}: audits {now}, waiting for {n + 2}")
        return bad

    final = wait_until("announced targets still clean two audits later", 30, base, two_more_audits)
    ts_legacy_after = {k: final.sum(k, target="ts_legacy", connection="0") for k in
                       ("mcp_probe_unannounced_changes_total", "mcp_probe_ttl_violations_total",
                        "mcp_probe_list_changed_notifications_total", "mcp_probe_notification_stream_up")}
    log(f"PASS: ready in {ready_s:.1f} s; unannounced swaps seen {unannounced_s:.1f} s after the swap "
        f"(audit {AUDIT_S} s + grace {GRACE_S} s); stdio_unannounced's seen at most {stdio_s:.1f} s after its swap")
    log(f"  ts_legacy (legacy client of the TS v2 server) after the announced swap: {ts_legacy_after}")
    for name, line in checks.items():
        log(f"  check {name}: {line}")
    return 0


if __name__ == "__main__":
    e2e.run(main)
