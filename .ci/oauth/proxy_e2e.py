"""`mcp_exporter proxy` in front of the OAuth pair of .ci/oauth, across several token lifetimes.

Why: the proxy's catalog session (its own tools/list walks, which judge clients' calls stale) must
authenticate like a target, with its own `--http-config` (here `oauth2`, client_secret_basic,
discovery, `issuer` naming the AS on its other origin), while each client's own Authorization is
forwarded unchanged and never lent to the catalog, nor the catalog's to a client.

Steps (the pair is already started and proven by check_server_side.py):
  1. `mcp_exporter proxy --http-config http.yml --upstream MCP`; within 60 s the catalog is up
     (`mcp_proxy_upstream_up 1`, 3 tools);
  2. a client with its own token (the private_key_jwt client, fetched here) opens a session through
     the proxy: `whoami` names that client, not the catalog's; a client without a token is refused
     (401 from the server, passed through: the catalog's credentials are not lent);
  3. for 4 token lifetimes + 2 s the client calls `search_legacy` (a tool the server does not list)
     every 2 s with a fresh token of its own, and every sample of /metrics (every 0.5 s) has the
     catalog up; each such call makes the catalog re-walk (at most every 5 s), so it walks with
     several of its own tokens;
  4. at the end: stale-tool calls counted for every call, the catalog walked >= 3 more times, the AS
     issued >= 3 tokens to the catalog's client in the window, and the catalog's client secret is
     in neither the proxy's log nor /metrics nor /proxy.json.

Usage: python proxy_e2e.py --work DIR --bin EXPORTER --mcp URL --issuer URL --ttl S --basic-id ID
         --basic-secret-file F --jwt-id ID --jwt-key-file F --as-log F --rs-log F
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_server_side as plain  # noqa: E402 - the plain OAuth client: tokens, legacy sessions
import exporter_e2e  # noqa: E402 - the AS log reader and the tails of the pair's logs
import sdk_peers_e2e as e2e  # noqa: E402 - processes, metrics, waits
from sdk_peers_e2e import Failure, free_port, log, start, wait_port  # noqa: E402

e2e.TAG = "oauth_proxy_e2e"
PROXY = "oauth"
CALL_EVERY = 2.0


def metrics(base: str) -> list[tuple[str, dict, float]]:
    return e2e.parse_metrics(e2e.http("GET", f"{base}/metrics").decode())


def value(samples, name: str, **labels) -> float:
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == w for k, w in labels.items()))


def walks(base: str) -> int:
    return next(p["catalog_walks"] for p in json.loads(e2e.http("GET", f"{base}/proxy.json")) if p["name"] == PROXY)


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--work", "--bin", "--mcp", "--issuer", "--basic-id", "--basic-secret-file", "--jwt-id", "--jwt-key-file",
              "--as-log", "--rs-log"):
        ap.add_argument(a, required=True)
    ap.add_argument("--ttl", type=int, required=True)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    secret = Path(args.basic_secret_file).read_text().strip()
    http_yml = work / "http.yml"
    http_yml.write_text(
        "# Written by .ci/oauth/proxy_e2e.py: the proxy's catalog session, as a target's oauth2.\n"
        "oauth2:\n"
        f"  client_id: {args.basic_id}\n"
        f"  client_secret_file: {Path(args.basic_secret_file).resolve()}\n"
        f"  issuer: {args.issuer}\n")
    as_skip = len(exporter_e2e.as_lines(args.as_log, 0))

    web, listen = free_port(), free_port()
    base, proxy_url = f"http://127.0.0.1:{web}", f"http://127.0.0.1:{listen}/mcp"
    proc = start("proxy", [args.bin, f"--web.listen-address=127.0.0.1:{web}", "proxy", "--name", PROXY,
                           "--upstream", args.mcp, "--listen", f"127.0.0.1:{listen}",
                           "--http-config", str(http_yml)], work)
    wait_port("proxy", web, proc, 30)
    deadline = time.monotonic() + 60
    while True:
        m = metrics(base)
        if value(m, "mcp_proxy_upstream_up", proxy=PROXY) == 1 and value(m, "mcp_proxy_upstream_tools", proxy=PROXY) == 3:
            break
        if time.monotonic() > deadline or proc.poll() is not None:
            raise Failure(f"(1) the catalog is not up with 3 tools within 60 s: /proxy.json "
                          f"{e2e.http('GET', f'{base}/proxy.json').decode()[:600]}")
        time.sleep(0.5)
    log("(1) catalog up with 3 tools, through oauth2 discovery")

    prm, meta, _ = plain.discover(args.mcp)
    resource, scopes = prm["resource"], prm["scopes_supported"]
    own = plain.Client("private_key_jwt", args.jwt_id, key_pem=Path(args.jwt_key_file).read_bytes())
    token, _ = own.token("2 client token", meta, resource, scopes, args.ttl)
    session = plain.Mcp(proxy_url, token)
    session.open("2 initialize through the proxy")
    session.request("2 tools/list through the proxy", "tools/list")
    who = session.request("2 whoami through the proxy", "tools/call", {"name": "whoami", "arguments": {}})
    text = who["content"][0]["text"]
    if not text.startswith(args.jwt_id + " "):
        raise Failure(f"(2) whoami through the proxy names {text!r}, want the client's own {args.jwt_id}")
    status, _, _ = plain.Mcp(proxy_url, None).post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": plain.LEGACY, "capabilities": {}, "clientInfo": {"name": "no-token", "version": "1"}}})
    if status != 401:
        raise Failure(f"(2) a client without a token got {status} through the proxy, want the server's 401")
    log(f"(2) the client's own token passes (whoami -> {text!r}); no token -> 401")

    walks_before = walks(base)
    window = 4 * args.ttl + 2
    end = time.monotonic() + window
    calls, samples, next_call = 0, 0, time.monotonic()
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Failure(f"the proxy exited with {proc.returncode} during the window")
        if time.monotonic() >= next_call:
            session.token, _ = own.token("3 client token", meta, resource, scopes, args.ttl)
            status, _, body = session.post({"jsonrpc": "2.0", "id": 1000 + calls, "method": "tools/call",
                                            "params": {"name": "search_legacy", "arguments": {"query": "q"}}})
            if status not in (200, 400, 404):
                raise Failure(f"(3) a call of search_legacy through the proxy answered {status}: {body[:300]!r}")
            calls += 1
            next_call += CALL_EVERY
        m = metrics(base)
        samples += 1
        if value(m, "mcp_proxy_upstream_up", proxy=PROXY) != 1:
            raise Failure(f"(3) sample {samples}: mcp_proxy_upstream_up is "
                          f"{value(m, 'mcp_proxy_upstream_up', proxy=PROXY)}: /proxy.json "
                          f"{e2e.http('GET', f'{base}/proxy.json').decode()[:600]}")
        time.sleep(0.5)

    problems = []
    m = metrics(base)
    stale = value(m, "mcp_proxy_stale_tool_calls_total", proxy=PROXY)
    if stale < calls:
        problems.append(f"mcp_proxy_stale_tool_calls_total is {stale:g} after {calls} calls of search_legacy")
    rewalks = walks(base) - walks_before
    if rewalks < 3:
        problems.append(f"the catalog walked {rewalks} times in the window, want >= 3")
    issued = sum(1 for line in exporter_e2e.as_lines(args.as_log, as_skip)
                 if (mt := exporter_e2e.AS_TOKEN.match(line)) and mt.group(1) == args.basic_id)
    if issued < 3:
        problems.append(f"the AS issued {issued} tokens to the catalog's client {args.basic_id}, want >= 3")
    shown = (Path(work / "proxy.log").read_text(errors="replace") + e2e.http("GET", f"{base}/metrics").decode()
             + e2e.http("GET", f"{base}/proxy.json").decode())
    if secret in shown:
        problems.append("the catalog's client secret shows in the proxy's log, /metrics or /proxy.json")
    if problems:
        raise Failure("(4) after the window:\n  " + "\n  ".join(problems))
    log(f"PASS: {samples} samples over {window} s, catalog up throughout; {calls} stale calls counted "
        f"({stale:g}), +{rewalks} catalog walks, {issued} tokens for the catalog's client")
    return 0


if __name__ == "__main__":
    exporter_e2e.main = main  # its run(): signals, FAIL, the tails of the pair's logs too
    exporter_e2e.run()
