#!/usr/bin/env python3
"""End to end with a real Prometheus: the exporter's demo is scraped, the alert rules are loaded,
every dashboard query must return data, and the stale-cache alert must fire for the lossy demo
target and never for the healthy one. Bounded: fails after DEADLINE seconds.

Usage: prometheus_e2e.py EXPORTER_BINARY WORKDIR
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTER_PORT = 10127
PROM_PORT = 19091
DEADLINE = 600  # seconds for the alert to reach firing (detection ~40 s + `for: 5m`)


def log(msg):
    print(f"[prometheus-e2e] {msg}", flush=True)


def query(expr):
    url = f"http://127.0.0.1:{PROM_PORT}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    return body["data"]["result"]


def wait_for(what, cond, deadline):
    start = time.time()
    while True:
        try:
            if cond():
                log(f"ok: {what} after {time.time() - start:.0f} s")
                return
        except Exception as e:  # Prometheus still starting
            last = e
        if time.time() - start > deadline:
            raise SystemExit(f"FAILED: {what} not reached within {deadline} s")
        time.sleep(2)


def dashboard_queries():
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "dashboards"))):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(ROOT, "dashboards", name)) as f:
            dash = json.load(f)
        panels = []
        stack = list(dash.get("panels", []))
        while stack:
            p = stack.pop(0)
            stack.extend(p.get("panels", []))
            panels.append(p)
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((name, p.get("title", "?"), t["expr"]))
    return out


def substitute(expr):
    repl = {
        "$__rate_interval": "1m",
        "$__interval": "15s",
        "$__range": "5m",
        "${__range}": "5m",
        "$job": "mcp_exporter",
        "${job}": "mcp_exporter",
        "$target": ".*",
        "${target}": ".*",
        "$connection": ".*",
        "${connection}": ".*",
    }
    for k in sorted(repl, key=len, reverse=True):
        expr = expr.replace(k, repl[k])
    # `label=~".*"` stays valid; `label="..."` with a regex would not: make it a matcher.
    expr = re.sub(r'(\w+)="\.\*"', r'\1=~".*"', expr)
    return expr


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rules = os.path.join(ROOT, "alerts", "mcp_exporter.rules.yml")
    cfg = os.path.join(work, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(
            "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
            f"rule_files:\n  - {rules}\n"
            "scrape_configs:\n  - job_name: mcp_exporter\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{EXPORTER_PORT}']\n"
        )
    procs = []
    try:
        procs.append(subprocess.Popen(
            [binary, "--demo", f"--web.listen-address=127.0.0.1:{EXPORTER_PORT}"],
            stdout=open(os.path.join(work, "exporter.log"), "w"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={work}/tsdb",
             f"--web.listen-address=127.0.0.1:{PROM_PORT}"],
            stdout=open(os.path.join(work, "prometheus.log"), "w"), stderr=subprocess.STDOUT))
        wait_for("exporter scraped", lambda: any(
            r["value"][1] == "1" for r in query('up{job="mcp_exporter"}')), 120)
        wait_for("lossy target drifted", lambda: any(
            float(r["value"][1]) > 0 for r in query(
                'sum by (target) (mcp_probe_cache_drift_tools{target="kb_lossy_gateway"})')), 180)

        # Failure panels have data once the demo's first churn (30 s) made kb_flaky_relist fail
        # a re-list; rate() panels once two scrapes saw the series. Retry until all have data.
        queries = dashboard_queries()
        failures = []

        def all_have_data():
            failures.clear()
            for dash, title, expr in queries:
                e = substitute(expr)
                try:
                    if not query(e):
                        failures.append(f"{dash} / {title}: no data for {e}")
                except Exception as err:
                    failures.append(f"{dash} / {title}: {err}")
            return not failures

        try:
            wait_for(f"all {len(queries)} dashboard queries return data", all_have_data, 240)
        except SystemExit:
            raise SystemExit("FAILED: dashboard queries without data:\n  " + "\n  ".join(failures))

        firing = 'ALERTS{alertname="McpProbeToolCacheStale",alertstate="firing",target="kb_lossy_gateway"}'
        wait_for("McpProbeToolCacheStale firing for kb_lossy_gateway", lambda: bool(query(firing)), DEADLINE)
        healthy = 'max_over_time(ALERTS{alertname="McpProbeToolCacheStale",target="kb_healthy"}[1h])'
        if query(healthy):
            raise SystemExit("FAILED: McpProbeToolCacheStale was pending or firing for kb_healthy")
        log("ok: McpProbeToolCacheStale never pending or firing for kb_healthy")
        other = query('ALERTS{alertstate="firing",target="kb_healthy"}')
        if other:
            raise SystemExit(f"FAILED: alerts firing for the healthy target: {other}")
        log("ok: no alert fires for kb_healthy")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
