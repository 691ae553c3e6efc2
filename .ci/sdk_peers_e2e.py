"""The exporter against real SDK servers: Python `mcp` low-level, `fastmcp`, TypeScript SDK.

Run by .ci/sdk_peers_e2e.sh (which installs the peers) with the venv's python:

    python sdk_peers_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

1. starts the three peers of .ci/peers/ on free loopback ports;
2. `EXPORTER_BIN check --call kb_stats URL` against each must exit 0 (skipped, loudly, when this
   build has no `check` subcommand);
3. starts the exporter on a config with one target per peer, the Python two pinned to
   `protocol_version: 2025-11-25` (mcp 2.x serves both eras; on `auto` the exporter settles on the
   modern one, where these peers, having no `subscriptions/listen` handler, declare no listChanged;
   modern_peers_e2e.py covers that era) (audit every 2 s, `connections: 2` on
   the Python peer, a `kb_stats` probe on each, plus fastmcp's `kb_announce`, which sends
   list_changed inside its POST response) and waits until, for every target and connection:
   up, ready, 3 pages, 14 tools (server and cache), drift 0, no unannounced change, no cursor
   error, every probe succeeding — in /metrics and in /status.json;
4. changes the tool list of the Python and the TypeScript peer (search_legacy -> search_v2, each
   peer sends notifications/tools/list_changed) and waits until every connection of those targets
   counted the notification, re-listed (a notification-triggered cache refresh), and is back to
   drift 0 with no unannounced change — and stays so over two more audits.

Every wait has a deadline; every child is killed on exit; on failure the logs are printed.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
T0 = time.monotonic()
CHILDREN: list[tuple[str, subprocess.Popen, Path]] = []
TAG = "sdk_peers"  # modern_peers_e2e.py imports these helpers and sets its own


def log(msg: str) -> None:
    print(f"[{TAG} {time.monotonic() - T0:5.1f}s] {msg}", flush=True)


class Failure(Exception):
    pass


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now, never one this process was given before: the kernel may
    hand the same free port to two binds in a row once the first socket is closed, and two
    servers told the same port fail at start (seen in CI: a proxy and an upstream)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no fresh free port in 100 tries")


def start(name: str, argv: list[str], logdir: Path, env: dict | None = None) -> subprocess.Popen:
    path = logdir / f"{name}.log"
    out = open(path, "wb")
    proc = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )
    CHILDREN.append((name, proc, path))
    log(f"started {name} (pid {proc.pid}): {' '.join(argv)}")
    return proc


def stop_all(suffix: str = "") -> None:
    """Stops (SIGTERM, then SIGKILL after 5 s) the children whose names end with `suffix` (all),
    and forgets them when a suffix named them."""
    mine = [proc for name, proc, _ in CHILDREN if name.endswith(suffix)]
    for proc in mine:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    for proc in mine:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=5)
    if suffix:
        CHILDREN[:] = [c for c in CHILDREN if not c[0].endswith(suffix)]


def tail_logs() -> None:
    for name, _, path in CHILDREN:
        try:
            lines = path.read_text(errors="replace").splitlines()[-30:]
        except OSError:
            continue
        print(f"---- tail {name} ({path})", file=sys.stderr)
        print("\n".join(lines), file=sys.stderr)


def http(method: str, url: str, timeout: float = 5.0) -> bytes:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def wait_port(name: str, port: int, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f"{name} exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise Failure(f"{name} did not listen on 127.0.0.1:{port} within {seconds:.0f} s")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


class Snapshot:
    def __init__(self, base: str):
        self.samples = parse_metrics(http("GET", f"{base}/metrics").decode())
        self.status = json.loads(http("GET", f"{base}/status.json"))

    def value(self, name: str, **labels) -> float | None:
        for n, ls, v in self.samples:
            if n == name and all(ls.get(k) == str(want) for k, want in labels.items()):
                return v
        return None

    def sum(self, name: str, **labels) -> float:
        return sum(v for n, ls, v in self.samples
                   if n == name and all(ls.get(k) == str(want) for k, want in labels.items()))

    def target(self, name: str) -> dict:
        for t in self.status["targets"]:
            if t["name"] == name:
                return t
        raise Failure(f"/status.json has no target {name}")


def wait_until(what: str, seconds: float, base: str, check, may_exit: tuple[str, ...] = ()) -> Snapshot:
    """Poll until check(snapshot) returns an empty list of problems; fail with the last ones, or
    at once when a child exits (but those whose names start with one of `may_exit`: clients
    that exit when done)."""
    deadline = time.monotonic() + seconds
    problems = ["never polled"]
    while time.monotonic() < deadline:
        for name, proc, _path in CHILDREN:
            if proc.poll() is not None and not name.startswith(may_exit):
                raise Failure(f"{name} exited with {proc.returncode} while waiting for: {what}")
        try:
            snap = Snapshot(base)
            problems = check(snap)
            if not problems:
                log(f"OK: {what}")
                return snap
        except (OSError, ValueError) as exc:
            problems = [f"exporter not answering: {exc}"]
        except Failure as exc:
            # The port answers before the configuration is applied: a target may not exist yet.
            problems = [str(exc)]
        time.sleep(0.5)
    raise Failure(f"within {seconds:.0f} s, not {what}:\n  " + "\n  ".join(problems[:40]))


def survey_all(ports: dict[str, int], survey_one, work: Path, suffix: str = "-survey") -> dict[str, dict]:
    """Every peer surveyed at once, survey_one(name, port) on its own instance, each bounded to
    60 s; the instances (started with `suffix`) are stopped afterwards. The facts are logged and
    written to work/wire_facts.json; a peer that fails or hangs fails the survey, named."""
    facts: dict[str, dict] = {}
    errors: dict[str, str] = {}

    def one(name: str) -> None:
        try:
            t = time.monotonic()
            facts[name] = survey_one(name, ports[name])
            facts[name]["survey took (s)"] = round(time.monotonic() - t, 1)
        except Exception as exc:  # noqa: BLE001 - reported below with the peer's name
            errors[name] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=one, args=(n,)) for n in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop_all(suffix)
    if errors or len(facts) != len(ports):
        raise Failure("survey failed: " + ("; ".join(f"{n}: {e}" for n, e in errors.items()) or "a survey hung"))
    for name in ports:
        log(f"wire {name}: " + "; ".join(f"{k}: {json.dumps(v)}" for k, v in facts[name].items()))
    (work / "wire_facts.json").write_text(json.dumps(facts, indent=1))
    return facts


def arguments() -> argparse.Namespace:
    """--work DIR (created) --bin EXPORTER --node NODE --node-path DIR/node_modules."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--node-path", required=True)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    return args


def main() -> int:
    args = arguments()
    work: Path = args.work
    py = sys.executable

    ports = {"py_sdk": free_port(), "fastmcp": free_port(), "ts_sdk": free_port(), "exporter": free_port()}
    peers = {
        "py_sdk": [py, str(PEERS / "py_lowlevel_server.py"), str(ports["py_sdk"])],
        "fastmcp": [py, str(PEERS / "fastmcp_server.py"), str(ports["fastmcp"])],
        "ts_sdk": [args.node, str(PEERS / "ts_sdk_server.mjs"), str(ports["ts_sdk"])],
    }
    url = {name: f"http://127.0.0.1:{ports[name]}/mcp" for name in peers}
    procs = {}
    for name, argv in peers.items():
        procs[name] = start(name, argv, work, env={"NODE_PATH": args.node_path})
    for name in peers:
        wait_port(name, ports[name], procs[name], 60)
    log("peers listening: " + ", ".join(f"{n} {u}" for n, u in url.items()))

    # ---- one-shot `check` against each peer
    bin_ = args.bin
    has_check = subprocess.run([bin_, "check", "--help"], capture_output=True, timeout=30).returncode == 0
    checks = {}
    if has_check:
        for name in peers:
            t = time.monotonic()
            r = subprocess.run([bin_, "check", "--call", "kb_stats", url[name]],
                               capture_output=True, text=True, timeout=90)
            (work / f"check-{name}.txt").write_text(r.stdout + r.stderr)
            summary = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
            if r.returncode != 0:
                print(r.stdout, r.stderr, sep="\n", file=sys.stderr)
                raise Failure(f"mcp_exporter check {url[name]} exited {r.returncode}")
            checks[name] = f"{summary} ({time.monotonic() - t:.1f} s)"
            log(f"check {name}: {checks[name]}")
    else:
        log("SKIPPED: this build has no `check` subcommand (mcp_exporter check --help failed)")

    # ---- the exporter
    config = work / "exporter.yml"
    config.write_text(f"""\
global:
  audit_interval: 2s
  ping_interval: 5s
  request_timeout: 2s
  notification_grace: 5s
targets:
  - name: py_sdk
    url: {url['py_sdk']}
    protocol_version: 2025-11-25
    connections: 2
    probes:
      - {{tool: kb_stats, interval: 2s, timeout: 2s, expect: {{text_contains: "ok"}}}}
  - name: fastmcp
    url: {url['fastmcp']}
    protocol_version: 2025-11-25
    probes:
      - {{tool: kb_stats, interval: 2s, timeout: 2s, expect: {{text_contains: "ok"}}}}
      - {{tool: kb_announce, interval: 3s, timeout: 2s, expect: {{text_contains: "announced"}}}}
  - name: ts_sdk
    url: {url['ts_sdk']}
    probes:
      - {{tool: kb_stats, interval: 2s, timeout: 2s, expect: {{text_contains: "ok"}}}}
""")
    r = subprocess.run([bin_, "--config.check", f"--config.file={config}"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise Failure(f"--config.check rejected {config}: {r.stdout}{r.stderr}")
    base = f"http://127.0.0.1:{ports['exporter']}"
    start("exporter", [bin_, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{ports['exporter']}"], work)
    conns = {"py_sdk": ["0", "1"], "fastmcp": ["0"], "ts_sdk": ["0"]}
    probes = {"py_sdk": ["kb_stats"], "fastmcp": ["kb_stats", "kb_announce"], "ts_sdk": ["kb_stats"]}

    def healthy(s: Snapshot, extra_checks=None) -> list[str]:
        bad = []

        def expect(what, got, want):
            if got != want:
                bad.append(f"{what} = {got}, want {want}")

        for t, cs in conns.items():
            expect(f"mcp_probe_up{{{t}}}", s.value("mcp_probe_up", target=t), 1)
            expect(f"mcp_probe_ready{{{t}}}", s.value("mcp_probe_ready", target=t), 1)
            for c in cs:
                lab = dict(target=t, connection=c)
                expect(f"connection_up{lab}", s.value("mcp_probe_connection_up", **lab), 1)
                expect(f"tools_list_pages{lab}", s.value("mcp_probe_tools_list_pages", **lab), 3)
                expect(f"tools{{view=server}}{lab}", s.value("mcp_probe_tools", view="server", **lab), 14)
                expect(f"tools{{view=cache}}{lab}", s.value("mcp_probe_tools", view="cache", **lab), 14)
                expect(f"list_changed_capable{lab}", s.value("mcp_probe_list_changed_capable", **lab), 1)
                expect(f"notification_stream_up{lab}", s.value("mcp_probe_notification_stream_up", **lab), 1)
                expect(f"cache_drift_tools (sum){lab}", s.sum("mcp_probe_cache_drift_tools", **lab), 0)
                expect(f"unannounced_changes_total{lab}", s.sum("mcp_probe_unannounced_changes_total", **lab), 0)
                expect(f"tools_list_cursor_errors_total{lab}", s.sum("mcp_probe_tools_list_cursor_errors_total", **lab), 0)
                expect(f"tools_list_duplicate_tools_total{lab}", s.sum("mcp_probe_tools_list_duplicate_tools_total", **lab), 0)
                if s.value("mcp_probe_cache_consistency_checks_total", **lab) in (None, 0):
                    bad.append(f"no audit completed yet on {lab}")
            for p in probes[t]:
                expect(f"tool_probe_success{{{t},{p}}}", s.value("mcp_probe_tool_probe_success", target=t, tool=p), 1)
            st = s.target(t)
            for c in st["connections"]:
                tag = f"status.json {t}/{c['connection']}"
                expect(f"{tag} state", c["state"], "up")
                d = c["drift"]
                expect(f"{tag} drift", (d["missing"], d["extra"], d["changed"]), ([], [], []))
                w = c.get("last_walk") or {}
                expect(f"{tag} last_walk (complete, pages, tools)", (w.get("complete"), w.get("pages"), w.get("tools")), (True, 3, 14))
                expect(f"{tag} cache tools", (c.get("cache") or {}).get("tools"), 14)
            for p in st["probes"]:
                expect(f"status.json {t} probe {p['tool']} success", p["success"], True)
        if extra_checks:
            bad.extend(extra_checks(s))
        return bad

    # fastmcp's kb_announce sends list_changed inside its POST response: counted, re-listed, no drift
    def announced(s: Snapshot) -> list[str]:
        n = s.value("mcp_probe_list_changed_notifications_total", target="fastmcp", connection="0") or 0
        return [] if n >= 1 else [f"fastmcp list_changed_notifications_total = {n}, want >= 1 (kb_announce sends one in-band)"]

    t_ready = time.monotonic()
    before = wait_until("every target up, ready, 3 pages, 14 tools, drift 0, no unannounced change, "
                        "no cursor error, every probe passing", 90, base, lambda s: healthy(s, announced))
    ready_s = time.monotonic() - t_ready
    for t, cs in conns.items():
        for c in cs:
            lab = dict(target=t, connection=c)
            log(f"  {t}/{c}: pages {before.value('mcp_probe_tools_list_pages', **lab):.0f}, "
                f"tools {before.value('mcp_probe_tools', view='server', **lab):.0f}, "
                f"list_changed {before.value('mcp_probe_list_changed_notifications_total', **lab) or 0:.0f}, "
                f"probes " + ", ".join(f"{p}={before.value('mcp_probe_tool_probe_success', target=t, tool=p):.0f}"
                                       for p in probes[t]))

    # ---- a real change at two peers, announced by the SDKs
    changed = ["py_sdk", "ts_sdk"]
    lc0 = {(t, c): before.value("mcp_probe_list_changed_notifications_total", target=t, connection=c) or 0
           for t in changed for c in conns[t]}
    rf0 = {(t, c): before.sum("mcp_probe_cache_refreshes_total", target=t, connection=c, trigger="notification")
           for t in changed for c in conns[t]}
    for t in changed:
        answer = json.loads(http("POST", url[t].replace("/mcp", "/admin/change")))
        if "search_v2" not in answer["tools"]:
            raise Failure(f"{t} /admin/change did not swap in search_v2: {answer}")
        log(f"{t}: tool list changed at the peer (search_legacy -> search_v2), notified {answer['notified']} session(s)")
    t_change = time.monotonic()

    def followed(s: Snapshot) -> list[str]:
        bad = []
        for t in changed:
            for c in conns[t]:
                lc = s.value("mcp_probe_list_changed_notifications_total", target=t, connection=c) or 0
                rf = s.sum("mcp_probe_cache_refreshes_total", target=t, connection=c, trigger="notification")
                if lc <= lc0[(t, c)]:
                    bad.append(f"{t}/{c}: list_changed_notifications_total still {lc}")
                if rf <= rf0[(t, c)]:
                    bad.append(f"{t}/{c}: no notification-triggered cache refresh yet ({rf})")
            for c in s.target(t)["connections"]:
                kinds = [e["kind"] for e in c["events"]]
                if "list_changed" not in kinds or "cache_replaced" not in kinds[kinds.index("list_changed"):]:
                    bad.append(f"{t}/{c['connection']}: timeline lacks list_changed -> cache_replaced: {kinds[-8:]}")
        return bad

    after = wait_until("list_changed counted on every connection of py_sdk and ts_sdk, cache refreshed, drift 0",
                       30, base, lambda s: healthy(s, followed))
    follow_s = time.monotonic() - t_change
    audits0 = {(t, c): after.value("mcp_probe_cache_consistency_checks_total", target=t, connection=c) or 0
               for t in changed for c in conns[t]}

    def two_more_audits(s: Snapshot) -> list[str]:
        bad = followed(s)
        for (t, c), n in audits0.items():
            now = s.value("mcp_probe_cache_consistency_checks_total", target=t, connection=c) or 0
            if now < n + 2:
                bad.append(f"{t}/{c}: audits {now}, waiting for {n + 2}")
        return bad

    wait_until("still drift 0 and no unannounced change two audits later", 30, base, lambda s: healthy(s, two_more_audits))

    log(f"PASS: ready in {ready_s:.1f} s after start; change followed in {follow_s:.1f} s")
    for name, line in checks.items():
        log(f"  check {name}: {line}")
    return 0


def run(main_) -> None:
    """Runs main_ with SIGTERM/SIGINT as exits, prints the failure and the logs, kills every child."""
    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 1
    try:
        rc = main_()
    except Failure as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        tail_logs()
    except Exception as exc:  # noqa: BLE001 - any error fails loudly with the logs
        print(f"FAIL: {type(exc).__name__}: {exc}", file=sys.stderr)
        tail_logs()
    finally:
        stop_all()
    sys.exit(rc)


if __name__ == "__main__":
    run(main)
