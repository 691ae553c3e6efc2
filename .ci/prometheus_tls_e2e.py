#!/usr/bin/env python3
"""A real Prometheus (Debian `prometheus` 2.42 or newer) scrapes the exporter over TLS with basic
authentication, as docs/security.md tells an operator to set it up.

Makes a CA and a server certificate for 127.0.0.1 with the openssl CLI, hashes a password with
the crate the exporter verifies with (examples/bcrypt_hash.rs), writes a web configuration file
that `promtool check web-config` must accept (the file format is the exporter-toolkit's), starts
the exporter with --web.config.file and --web.enable-lifecycle and a Prometheus with two jobs
against it, then proves:

  (a) the job with `scheme: https`, `basic_auth` and `tls_config.ca_file` has `up == 1`;
  (b) the job with a wrong password has `up == 0`, and Prometheus reports the 401;
  (c) directly: the right password gets 200, a wrong one 401 with `WWW-Authenticate: Basic`,
      a plain HTTP request to the port gets no HTTP answer, and POST /-/reload with the right
      password is served (lifecycle enabled).

Bounded: every wait polls a condition with a deadline, the whole run has HARD_DEADLINE seconds,
and both processes run in their own process groups, killed on every exit. On failure it prints
what failed and the tails of both logs, and exits 1.

Usage: prometheus_tls_e2e.py EXPORTER_BINARY WORKDIR      (takes about 20 seconds)
"""
import base64
import http.client
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request

# The process, polling and logging helpers of the main Prometheus e2e, in the same folder.
from prometheus_e2e import Failed, free_port, log, main_of, start_both, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARD_DEADLINE = 240
USER = "prometheus"
PASSWORD = "scrape-secret"


def sh(*cmd, stdin=None):
    out = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120)
    if out.returncode != 0:
        raise Failed(f"{' '.join(cmd)} (exit {out.returncode}):\n{(out.stdout + out.stderr).decode(errors='replace')}")
    return out.stdout.decode()


def make_certificates(work):
    """A CA, and a certificate for 127.0.0.1 signed by it: (ca file, cert file, key file)."""
    ca_key, ca_crt = os.path.join(work, "ca.key"), os.path.join(work, "ca.crt")
    key, csr, crt = (os.path.join(work, n) for n in ("server.key", "server.csr", "server.crt"))
    ext = os.path.join(work, "server.ext")
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=mcp_exporter CI CA")
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
       "-out", crt, "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


def bcrypt_hash(password):
    """The hash from examples/bcrypt_hash.rs (built here if `cargo test` did not already)."""
    sh("cargo", "build", "-q", "--manifest-path", os.path.join(ROOT, "Cargo.toml"), "--example", "bcrypt_hash")
    tool = os.path.join(ROOT, "target", "debug", "examples", "bcrypt_hash")
    return sh(tool, "10", stdin=password.encode()).strip()


RETRY_429_S = 30  # how long a request keeps honouring 429 + Retry-After


def request(method, url, ca, auth=None):
    """(status, headers) of one request over HTTPS trusting `ca` only.

    A 429 with Retry-After is honoured, as a client should, within RETRY_429_S: the exporter
    checks at most one unverified password per address at a time (docs/security.md), and the
    wrong_password job's scrape comes from this same address, so a check may be under way."""
    ctx = ssl.create_default_context(cafile=ca)
    deadline = time.monotonic() + RETRY_429_S
    while True:
        req = urllib.request.Request(url, method=method)
        if auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status, r.headers
        except urllib.error.HTTPError as e:
            retry = e.headers.get("Retry-After")
            if e.code != 429 or retry is None or time.monotonic() > deadline:
                return e.code, e.headers
            log(f"note: {method} {url} answered 429, Retry-After {retry}: another password check from this address is under way")
            time.sleep(float(retry))


def plain_http_is_refused(port):
    """A plain HTTP request to the TLS port must not get an HTTP answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        raise Failed(f"plain HTTP to the TLS port was answered: HTTP {resp.status}")
    except (http.client.HTTPException, OSError) as e:
        log(f"ok: plain HTTP to the TLS port gets no HTTP answer ({type(e).__name__})")
    finally:
        conn.close()


def run(binary, work):
    for tool in ("prometheus", "promtool", "openssl"):
        if not shutil.which(tool):
            raise Failed(f"{tool} not on PATH")
    ca, crt, key = make_certificates(work)
    web = os.path.join(work, "web.yml")
    with open(web, "w") as f:
        f.write(
            f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n  min_version: TLS12\n"
            "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
            f"basic_auth_users:\n  {USER}: {bcrypt_hash(PASSWORD)}\n"
        )
    sh("promtool", "check", "web-config", web)
    log("ok: promtool check web-config accepts the web configuration file")
    config = os.path.join(work, "mcp_exporter.yml")
    with open(config, "w") as f:
        f.write("targets: []\n")
    exporter_port, prom_port = free_port(), free_port()
    password_file = os.path.join(work, "password")
    with open(password_file, "w") as f:
        f.write(PASSWORD)
    prom_cfg = os.path.join(work, "prometheus.yml")
    # The two jobs scrape at different intervals: both come from this one address, where the
    # exporter checks one unverified password at a time (429 meanwhile), so with equal intervals
    # Prometheus' fixed scrape offsets could put every right-password scrape inside a
    # wrong-password check on a loaded box; with 2 s and 3 s the offsets drift apart.
    job = (
        "  - job_name: {name}\n    scrape_interval: {interval}\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n"
        "    basic_auth:\n      username: {user}\n      {password}\n"
        "    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    )
    with open(prom_cfg, "w") as f:
        f.write("global:\n  scrape_interval: 2s\nscrape_configs:\n")
        f.write(job.format(name="tls_basic_auth", interval="2s", ca=ca, user=USER, password=f"password_file: {password_file}", port=exporter_port))
        f.write(job.format(name="wrong_password", interval="3s", ca=ca, user=USER, password="password: not-the-password", port=exporter_port))
    sh("promtool", "check", "config", prom_cfg)
    prom, alive = start_both([binary, f"--config.file={config}", f"--web.config.file={web}", "--web.enable-lifecycle",
                              f"--web.listen-address=127.0.0.1:{exporter_port}"], prom_cfg, prom_port, work)

    def up(job_name, value):
        return alive() and any(r["value"][1] == value for r in prom.query(f'up{{job="{job_name}"}}'))

    # (a), (b)
    wait_for("Prometheus scrapes the exporter over TLS with basic auth: up == 1", lambda: up("tls_basic_auth", "1"), 60)
    wait_for("the job with a wrong password: up == 0", lambda: up("wrong_password", "0"), 60)
    # The wrong job's last error is the 401, except when its scrape met the right job's check
    # under way from the same address (429, one unverified check per address): wait for a 401.
    def wrong_password_401():
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/targets", timeout=10).read())
        return any(t["labels"].get("job") == "wrong_password" and "401" in t.get("lastError", "")
                   for t in targets["data"]["activeTargets"])
    wait_for("Prometheus reports the wrong password's scrape as HTTP 401", wrong_password_401, 60)

    # (c)
    base = f"https://127.0.0.1:{exporter_port}"
    status, headers = request("GET", f"{base}/metrics", ca, (USER, PASSWORD))
    if status != 200 or headers.get("X-Content-Type-Options") != "nosniff":
        raise Failed(f"right password: HTTP {status}, headers {dict(headers)}")
    status, headers = request("GET", f"{base}/metrics", ca, (USER, "wrong"))
    if status != 401 or headers.get("WWW-Authenticate") != "Basic":
        raise Failed(f"wrong password: HTTP {status}, WWW-Authenticate {headers.get('WWW-Authenticate')!r}")
    log("ok: right password 200 (with the configured header), wrong password 401 with WWW-Authenticate: Basic")
    plain_http_is_refused(exporter_port)
    status, _ = request("POST", f"{base}/-/reload", ca, (USER, PASSWORD))
    if status != 200:
        raise Failed(f"POST /-/reload with --web.enable-lifecycle: HTTP {status}")
    log("ok: POST /-/reload served over TLS with basic auth and --web.enable-lifecycle")
    alive()


if __name__ == "__main__":
    main_of(run, __doc__, HARD_DEADLINE)
