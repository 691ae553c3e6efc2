#!/usr/bin/env python3
"""End to end with a real Prometheus (Debian `prometheus` 2.42 or newer).

Starts the exporter on its embedded demo and a Prometheus that scrapes it every 5 s with
alerts/mcp_exporter.rules.yml loaded, both on loopback ports picked free, then proves:

  (a) every query of every dashboard panel returns data through the Prometheus HTTP API, and every
      templating variable (`label_values(...)`) has values. Each query is polled until it has data
      or its deadline passes: failure panels only get data once the demo's first redeploy (30 s)
      makes kb_flaky_relist fail a re-list, and rate()/increase() need two scrapes of a series.
      Variables are set as an operator would for the whole fleet: job = the scraped job, target and
      connection = `.*` (All), so a panel passes when it has data for at least one demo target;
  (b) McpProbeToolCacheStale reaches firing for kb_lossy_gateway (drift after ~40 s plus `for: 5m`),
      and McpProbeListCacheStale for its prompts,
      and is never pending or firing for kb_healthy or kb_modern (the 2026-07-28-only gateway),
      and no alert fires for either;
      McpProbeToolVanished reaches firing for kb_lossy_gateway (its probe of search_legacy fails
      with unknown_tool from the first redeploy at 30 s, plus `for: 5m`), and then, with that
      probe failing and the target not ready for minutes, neither McpProbeTargetNotReady nor
      McpProbeToolProbeFailing is pending or firing for it (one alert per cause); none of the
      health-layer alerts is pending or firing for kb_healthy or kb_modern after the start-up (ready and the
      probe's success are 0 until the first walk and the first run);
  (c) `promtool check metrics` on the exporter's /metrics is clean (exit 0, no lint output);
  (d) every metric name that the dashboards and rules use was scraped from the exporter during the
      run, except the names in KNOWN_ABSENT: counters whose series appear only with their first
      event, which the demo never produces. (tests/monitoring.rs checks the same names against the
      exporter's catalog; this checks them against what a real scrape delivers.) Recording-rule
      names (`level:metric:op`) are the rules' own outputs and are not exporter metrics;
  (e) Prometheus loaded every rule of the rules file and evaluates each without error;
  (f) the demo's proxy (kb_proxy) sees its careless clients (crates/mcp-lab/src/demo_clients.rs) for what they
      are, each under its own `client` label: first-page-only sessions, stale-tool calls on
      search_legacy, stale-schema calls, sessions without re-list after a reconnect; and the
      correct client re-lists after list_changed with none of those counted against it.

Bounded: the whole run fails after HARD_DEADLINE seconds; every wait polls a condition with its
own deadline. The exporter and Prometheus run in their own process groups, which are killed on
every exit (success, failure, exception, SIGINT/SIGTERM). On failure it prints what failed (the
dashboard, panel and query) and the tails of both logs, and exits 1.

Usage: prometheus_e2e.py EXPORTER_BINARY WORKDIR      (takes about 6 minutes)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from sdk_peers_e2e import free_port  # one port rule: never the same port twice

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "alerts", "mcp_exporter.rules.yml")
DASHBOARDS = os.path.join(ROOT, "dashboards")
JOB = "mcp_exporter"
STALE_ALERT = "McpProbeToolCacheStale"
LIST_STALE_ALERT = "McpProbeListCacheStale"
VANISHED_ALERT = "McpProbeToolVanished"
# The health-layer alerts (readiness, functional probes).
HEALTH_ALERTS = ("McpProbeTargetNotReady", "McpProbeToolProbeFailing", VANISHED_ALERT, "McpProbeToolProbeRefused")
STARTUP = 60  # seconds after the start in which the health layers may still read 0
LOSSY = "kb_lossy_gateway"
HEALTHY = "kb_healthy|kb_modern"  # a regex: the dual-era healthy gateway and the modern-only one
HARD_DEADLINE = 540  # seconds for the whole run; the alert alone needs ~40 s + `for: 5m`
POLL = 2  # seconds between polls of a condition

# Referenced by dashboards or rules, but absent from the demo's scrape, by design. A name added here
# must say why.
_FIRST_EVENT = "written from its first event (docs/metrics.md), and the demo's targets never have one"
KNOWN_ABSENT: dict = {
    # Counters of anomalies appear with their first event (docs/scaling.md says why; tests/monitoring.rs
    # holds every alert that reads one to holding for 10 minutes or more). The failure-mode tests
    # assert each against the lab scenario that produces it.
    "mcp_probe_session_failures_total": _FIRST_EVENT + " (tests/hostile.rs)",
    "mcp_probe_session_expiries_total": _FIRST_EVENT + " (tests/failure_modes.rs, F6)",
    "mcp_probe_ping_failures_total": _FIRST_EVENT + " (tests/failure_modes.rs, F15)",
    "mcp_probe_notification_stream_reconnects_total": _FIRST_EVENT + " (tests/failure_modes.rs, F4)",
    "mcp_probe_tools_list_cursor_errors_total": _FIRST_EVENT + " (tests/failure_modes.rs, F8)",
    "mcp_probe_tools_list_repeated_cursors_total": _FIRST_EVENT + " (tests/failure_modes.rs, F9)",
    "mcp_probe_tools_list_loop_cap_hits_total": _FIRST_EVENT + " (tests/failure_modes.rs, F10)",
    "mcp_probe_list_changed_without_change_total": _FIRST_EVENT + " (tests/failure_modes.rs, F14)",
    # Per-target auth series exist only for targets with credentials (an auth block or a client
    # certificate); this run's demo targets have none. .ci/oauth_e2e.sh asserts all three against
    # a real OAuth-protected server.
    "mcp_probe_auth_failures_total": "no target with credentials in this run (see .ci/oauth_e2e.sh)",
    "mcp_probe_auth_token_expiry_timestamp_seconds": "no oauth2 target in this run (see .ci/oauth_e2e.sh)",
    "mcp_probe_auth_token_requests_total": "no oauth2 target in this run (see .ci/oauth_e2e.sh)",
    # Discovery series exist only when a file_sd/http_sd source is configured; the demo has none.
    # tests/discovery.rs asserts them against real sources.
    "mcp_exporter_sd_last_refresh_successful": "no discovery source in the demo (see tests/discovery.rs)",
    # No mcp_proxy_* name here: the demo's clients of kb_proxy (crates/mcp-lab/src/demo_clients.rs) produce
    # every proxy series the dashboards and rules read, stale-schema calls included
    # (demo-old-schema calls search_v2 with the revision it listed before a redeploy).
}

START = time.monotonic()
PROCS = []


class Failed(Exception):
    pass


def log(msg):
    print(f"[prometheus-e2e {time.monotonic() - START:5.0f} s] {msg}", flush=True)


def remaining():
    return HARD_DEADLINE - (time.monotonic() - START)


def http_json(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except ValueError:
            pass
        raise Failed(f"HTTP {e.code}: {detail}") from None  # 400: the query itself is invalid
    if body.get("status") != "success":
        raise Failed(f"{url}: {body}")
    return body["data"]


class Prom:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def query(self, expr):
        return http_json(f"{self.base}/query?" + urllib.parse.urlencode({"query": expr}))["result"]

    def label_values(self, label, match):
        q = urllib.parse.urlencode({"match[]": match}) if match else ""
        return http_json(f"{self.base}/label/{label}/values?{q}")

    def rules(self):
        return http_json(f"{self.base}/rules")["groups"]


def wait_for(what, cond, deadline):
    """Polls cond() until it is truthy; fails after `deadline` s or at the hard deadline."""
    start = time.monotonic()
    limit = min(deadline, remaining())
    last = None
    while True:
        try:
            if cond():
                log(f"ok: {what} after {time.monotonic() - start:.0f} s")
                return
        except (OSError, Failed, ValueError) as e:  # Prometheus still starting, a query error
            last = e
        if time.monotonic() - start > limit:
            raise Failed(f"{what}: not reached within {limit:.0f} s" + (f" (last error: {last})" if last else ""))
        time.sleep(POLL)


def dashboard_panels():
    """(dashboard file, dashboard JSON, [(panel title, expr)]) for every dashboard."""
    out = []
    for name in sorted(os.listdir(DASHBOARDS)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(DASHBOARDS, name)) as f:
            dash = json.load(f)
        queries = []
        stack = list(dash.get("panels", []))
        while stack:
            p = stack.pop(0)
            stack.extend(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    queries.append((p.get("title", "?"), t["expr"]))
        out.append((name, dash, queries))
    return out


# Grafana's variables as the e2e sets them: the whole fleet (All) on a 5 s scrape interval.
GRAFANA_VARS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "15m",
    "job": JOB,
    "target": ".*",
    "connection": ".*",
}


def substitute(expr):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name not in GRAFANA_VARS:
            raise Failed(f"unknown dashboard variable ${name} in {expr}")
        return GRAFANA_VARS[name]

    expr = re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)
    # `label=".*"` would match the literal string: All is a regex matcher.
    return re.sub(r'(\w+)="\.\*"', r'\1=~".*"', expr)


def check_dashboards(prom, deadline):
    """(a) Polls every panel query (and variable) until each has data; fails naming the rest."""
    pending = {}
    for name, dash, queries in dashboard_panels():
        for title, expr in queries:
            pending[(name, f"panel {title!r}", expr)] = substitute(expr)
        for var in dash.get("templating", {}).get("list", []):
            if var.get("type") != "query":
                continue
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip())
            if not m:
                raise Failed(f"{name}: variable {var['name']}: unsupported query {q}")
            pending[(name, f"variable ${var['name']}", q)] = ("label_values", substitute(m.group(1)), m.group(2))
    total = len(pending)
    errors = {}
    start = time.monotonic()
    limit = min(deadline, remaining())
    while pending:
        for key, q in list(pending.items()):
            try:
                if isinstance(q, tuple):
                    has_data = bool(prom.label_values(q[2], q[1]))
                else:
                    has_data = bool(prom.query(q))
            except (OSError, Failed, ValueError) as e:
                errors[key] = str(e)
                continue
            errors.pop(key, None)
            if has_data:
                del pending[key]
        if not pending:
            break
        # A query Prometheus rejects (HTTP 400) will not get better by waiting: fail at once.
        bad = [k for k, e in errors.items() if k in pending and e.startswith("HTTP 400")]
        if bad or time.monotonic() - start > limit:
            pending = {k: pending[k] for k in (bad or pending)}
            lines = [
                f"{dash} / {what}: {errors.get((dash, what, raw), 'no data')}\n      query: {pending[(dash, what, raw)]}"
                for dash, what, raw in sorted(pending)
            ]
            why = "rejected by Prometheus" if bad else f"without data after {limit:.0f} s"
            raise Failed(f"{len(pending)} of {total} dashboard queries {why}:\n    " + "\n    ".join(lines))
        time.sleep(POLL)
    log(f"ok: all {total} dashboard panel queries and variables return data after {time.monotonic() - start:.0f} s")


def referenced_metric_names():
    """Exporter metric names used by the dashboards and rules (the scan of tests/monitoring.rs)."""
    texts = [json.dumps([d.get("templating", {}), qs]) for _, d, qs in dashboard_panels()]
    with open(RULES) as f:
        texts += [line for line in f if not line.strip().lstrip("- ").startswith("record:")]
    names = set()
    for word in re.findall(r"[A-Za-z0-9_:]+", "\n".join(texts)):
        if word.startswith(("mcp_probe_", "mcp_exporter_", "mcp_proxy_")) and ":" not in word and not word.endswith("_"):
            names.add(word)
    return names


def check_names(prom):
    """(d) Every referenced name was scraped, or is a documented KNOWN_ABSENT counter."""
    scraped = set(prom.label_values("__name__", f'{{job="{JOB}"}}'))
    used = referenced_metric_names()
    missing = sorted(used - scraped - set(KNOWN_ABSENT))
    if missing:
        raise Failed("dashboards/rules use metrics the exporter never delivered in this run: " + ", ".join(missing))
    for name, why in KNOWN_ABSENT.items():
        if name not in used:
            raise Failed(f"KNOWN_ABSENT lists {name}, which no dashboard or rule uses: remove it")
        state = "scraped in this run" if name in scraped else f"absent as expected: {why}"
        log(f"note: {name} {state}")
    absent = f" (or are known absent: {', '.join(sorted(KNOWN_ABSENT))})" if KNOWN_ABSENT else ""
    log(f"ok: all {len(used)} metric names used by dashboards and rules were scraped{absent}")


def check_promtool_metrics(exporter_port, work):
    """(c) promtool check metrics on the exporter's exposition: exit 0 and no lint output."""
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter_port}/metrics", timeout=10) as r:
        text = r.read()
    path = os.path.join(work, "metrics.txt")
    with open(path, "wb") as f:
        f.write(text)
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
    report = (out.stdout + out.stderr).decode().strip()
    if out.returncode != 0 or report:
        raise Failed(f"promtool check metrics (exit {out.returncode}) on {path}:\n{report}")
    log(f"ok: promtool check metrics clean on {len(text.splitlines())} lines of /metrics")


def check_rules_loaded(prom):
    """(e) Prometheus loaded every rule of the file and each evaluates without error."""
    with open(RULES) as f:
        want = len(re.findall(r"^\s*- (?:alert|record):", f.read(), re.MULTILINE))
    rules = [r for g in prom.rules() for r in g["rules"]]
    bad = [f"{r['name']}: {r.get('lastError')}" for r in rules if r.get("health") != "ok"]
    if len(rules) != want or bad:
        raise Failed(f"Prometheus loaded {len(rules)} of {want} rules; unhealthy: {bad}")
    return f"Prometheus evaluates all {want} rules of {os.path.basename(RULES)} without error"


def fires_for_lossy_only(prom, alert, selector=""):
    """`alert` reaches firing for the lossy target (with `selector`'s labels too); never pending
    or firing for the healthy ones."""
    firing = f'ALERTS{{alertname="{alert}",alertstate="firing",target="{LOSSY}"{selector}}}'
    wait_for(f"{alert} firing for {LOSSY}{selector}", lambda: prom.query(firing), remaining() - 10)
    healthy = f'max_over_time(ALERTS{{alertname="{alert}",target=~"{HEALTHY}"}}[1h])'
    if prom.query(healthy):
        raise Failed(f"{alert} was pending or firing for {HEALTHY}: {prom.query(healthy)}")
    log(f"ok: {alert} firing for {LOSSY}{selector}, never pending or firing for {HEALTHY}")


def check_stale_alert(prom):
    """(b) Firing for the lossy target; never pending or firing for the healthy one; and no
    alert at all firing for the healthy one."""
    fires_for_lossy_only(prom, STALE_ALERT)
    other = prom.query(f'ALERTS{{alertstate="firing",target=~"{HEALTHY}"}}')
    if other:
        raise Failed(f"alerts firing for the healthy target {HEALTHY}: {[a['metric'] for a in other]}")
    log(f"ok: no alert fires for {HEALTHY}")


def check_list_stale_alert(prom):
    """(b) The other lists: McpProbeListCacheStale fires for the lossy target's prompts (the
    gateway drops their notification too); never for the healthy ones."""
    fires_for_lossy_only(prom, LIST_STALE_ALERT, ',list="prompts"')


def check_health_alerts(prom):
    """(b) The vanished tool fires for the lossy target, once; nothing for the healthy one."""
    firing = f'ALERTS{{alertname="{VANISHED_ALERT}",alertstate="firing",target="{LOSSY}",tool="search_legacy"}}'
    wait_for(f"{VANISHED_ALERT} firing for {LOSSY} tool search_legacy", lambda: prom.query(firing), remaining() - 10)
    others = "|".join(a for a in HEALTH_ALERTS if a != VANISHED_ALERT)
    doubles = prom.query(f'ALERTS{{alertname=~"{others}",target="{LOSSY}"}}')
    if doubles:
        raise Failed(f"the vanished tool also raises other health alerts for {LOSSY}: {[a['metric'] for a in doubles]}")
    log(f"ok: neither McpProbeTargetNotReady nor McpProbeToolProbeFailing pending or firing for {LOSSY}")
    window = int(time.monotonic() - START - STARTUP)
    healthy = f'max_over_time(ALERTS{{alertname=~"{"|".join(HEALTH_ALERTS)}",target=~"{HEALTHY}"}}[{window}s])'
    seen = prom.query(healthy)
    if seen:
        raise Failed(f"health-layer alerts pending or firing for {HEALTHY} in the last {window} s: {[a['metric'] for a in seen]}")
    log(f"ok: no health-layer alert pending or firing for {HEALTHY} in the last {window} s")


def check_proxy_clients(prom):
    """(f) The demo's clients of kb_proxy, each flagged for what it does, the correct one clean."""
    want = {
        "first-page-only sessions of demo-first-page":
            'sum(mcp_proxy_first_page_only_sessions_total{proxy="kb_proxy",client="demo-first-page"}) > 0',
        "stale-tool calls of demo-cached on search_legacy":
            'sum(mcp_proxy_stale_tool_calls_total{proxy="kb_proxy",client="demo-cached",tool="search_legacy"}) > 0',
        "stale-schema calls of demo-old-schema":
            'sum(mcp_proxy_stale_schema_calls_total{proxy="kb_proxy",client="demo-old-schema"}) > 0',
        "sessions of demo-reconnect without re-list after a reconnect":
            'sum(mcp_proxy_sessions_without_relist_total{proxy="kb_proxy",client="demo-reconnect",after="reconnect"}) > 0',
        "re-lists of demo-correct after list_changed":
            'sum(mcp_proxy_relist_lag_seconds_count{proxy="kb_proxy"}) > 0',
    }
    for what, expr in want.items():
        wait_for(what, lambda e=expr: prom.query(e), min(120, remaining() - 10))
    dirty = prom.query(
        'sum by (__name__) ({__name__=~"mcp_proxy_(first_page_only_sessions|stale_tool_calls|stale_schema_calls'
        '|sessions_without_relist|cursor_errors)_total",proxy="kb_proxy",client="demo-correct"}) > 0')
    if dirty:
        raise Failed(f"the demo's correct client is flagged: {[d['metric'] for d in dirty]}")
    log("ok: kb_proxy flags demo-first-page, demo-cached, demo-old-schema and demo-reconnect; demo-correct is clean")


def start(cmd, logfile):
    """A child in its own process group (killed as a group on exit)."""
    log("start: " + " ".join(cmd))
    p = subprocess.Popen(cmd, stdout=open(logfile, "w"), stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    PROCS.append(p)
    return p


def stop_all():
    for p in PROCS:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in PROCS:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return str(e)


def start_both(exporter_cmd, prom_cfg, prom_port, work):
    """The exporter and a Prometheus with `prom_cfg`, logging to WORKDIR/exporter.log and
    prometheus.log: (the Prometheus API, a check that raises SystemExit if either has exited)."""
    exporter = start(exporter_cmd, os.path.join(work, "exporter.log"))
    prometheus = start(["prometheus", f"--config.file={prom_cfg}", f"--storage.tsdb.path={work}/tsdb",
                        f"--web.listen-address=127.0.0.1:{prom_port}"],
                       os.path.join(work, "prometheus.log"))

    def alive():
        for p, what in ((exporter, "exporter"), (prometheus, "prometheus")):
            if p.poll() is not None:
                raise SystemExit(f"FAILED: {what} exited with {p.returncode}")
        return True

    return Prom(prom_port), alive


def run(binary, work):
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            raise Failed(f"{tool} not on PATH (Debian package `prometheus`)")
    if not os.access(binary, os.X_OK):
        raise Failed(f"exporter binary {binary} is not executable (cargo build first)")
    exporter_port, prom_port = free_port(), free_port()
    cfg = os.path.join(work, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(
            "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
            f"rule_files:\n  - {RULES}\n"
            f"scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        )
    out = subprocess.run(["promtool", "check", "config", cfg], capture_output=True, timeout=60)
    if out.returncode != 0:
        raise Failed(f"promtool check config {cfg}:\n{(out.stdout + out.stderr).decode()}")
    prom, alive = start_both([binary, "--demo", f"--web.listen-address=127.0.0.1:{exporter_port}"], cfg, prom_port, work)

    wait_for("Prometheus scrapes the exporter", lambda: alive() and any(
        r["value"][1] == "1" for r in prom.query(f'up{{job="{JOB}"}}')), 60)
    wait_for("every rule of the rules file loaded and evaluated without error", lambda: check_rules_loaded(prom), 30)
    check_dashboards(prom, 180)
    check_promtool_metrics(exporter_port, work)
    check_proxy_clients(prom)
    check_stale_alert(prom)
    check_list_stale_alert(prom)
    check_health_alerts(prom)
    alive()
    log("ok: again, now that every rule has seen real data for minutes: " + check_rules_loaded(prom))
    check_names(prom)


def main_of(run, usage, backstop):
    """The command line of an e2e script: `run(binary, work)` in a fresh WORKDIR, killed after
    `backstop` seconds, every child stopped on every exit, the logs' tails printed on failure."""
    if len(sys.argv) != 3:
        sys.exit(usage)
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)  # a fresh TSDB: no alert history of an earlier run
    os.makedirs(work)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAILED: terminated"))
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(f"FAILED: hard deadline of {backstop} s"))
    signal.alarm(backstop)  # the backstop if a single call hangs past every deadline
    ok = False
    try:
        run(binary, work)
        ok = True
    except Failed as e:
        print(f"FAILED: {e}", file=sys.stderr, flush=True)
    finally:
        signal.alarm(0)
        stop_all()
        if not ok:
            for name in ("exporter.log", "prometheus.log"):
                path = os.path.join(work, name)
                print(f"---- last lines of {path}\n{tail(path)}", file=sys.stderr, flush=True)
    if not ok:
        sys.exit(1)
    log("all checks passed")


def main():
    main_of(run, __doc__, HARD_DEADLINE + 30)


if __name__ == "__main__":
    main()
