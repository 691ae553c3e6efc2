"""The exporter against the OAuth pair of .ci/oauth, across several token lifetimes.

Why: tokens that expire during the run are the normal life of an OAuth client, and the one thing a
monitor must never turn into an outage. The pair (as.mjs, rs.py) is already started and proven by
check_server_side.py; this starts the exporter on three targets of the one MCP server, all with
`oauth2` and no `token_url` (so MCP authorization discovery: 401 -> Protected Resource Metadata ->
AS metadata -> client_credentials with `resource`). The AS listens on another port than the MCP
server, so on another origin: each target names it as `oauth2.issuer`, as an operator must (the
exporter sends credentials only to the issuer its configuration names, or to an authorization
server on the MCP URL's own origin; docs/security.md):

  oauth_basic   client_secret_basic (secret file), no `scopes`: the scope comes from the PRM's
                scopes_supported (the MCP scope selection strategy); protocol_version auto (modern)
  oauth_jwt     private_key_jwt RS256 (key file), `scopes: [mcp:tools]`; auto (modern)
  oauth_legacy  as oauth_basic, protocol_version 2025-11-25: the legacy session (Mcp-Session-Id)
                must outlive its tokens

and asserts, from /metrics:
  1. within 60 s every target up and ready, 3 tools listed, with no failure counted on the way
     (one fails the run at once: counters only grow);
  2. then for 4 token lifetimes + 2 s (samples every 0.5 s), every sample: every target up, no walk,
     session or ping failure, no `mcp_probe_auth_failures_total`, no token request with
     result="failure", no new session (a token expiry is not a reason to reconnect);
  3. at the end, per target: >= 3 more successful token requests, >= 3 distinct
     `mcp_probe_auth_token_expiry_timestamp_seconds` values seen, none more than TTL (+2 s) ahead
     of its sample, >= 3 more audit walks, and the AS issued those tokens (its log, per client) for
     audience = the MCP URL with scope mcp:tools and refused none.

Usage: python exporter_e2e.py --work DIR --bin EXPORTER --mcp URL --issuer URL --ttl S --basic-id ID
         --basic-secret-file F --jwt-id ID --jwt-key-file F --as-log F --rs-log F
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import sdk_peers_e2e as e2e  # noqa: E402 - the shared process, metrics and wait helpers of .ci
from sdk_peers_e2e import Failure, Snapshot, free_port, log, start, wait_port, wait_until  # noqa: E402

e2e.TAG = "oauth_e2e"
TARGETS = {"oauth_basic": "basic", "oauth_jwt": "jwt", "oauth_legacy": "basic"}
SCOPE = "mcp:tools"
INTERVAL = "2s"  # audit, ping and request timeout: several walks per token lifetime


def config(args: argparse.Namespace) -> str:
    issuer = f"      issuer: {args.issuer}\n"
    basic = (f"      client_id: {args.basic_id}\n"
             f"      client_secret_file: {Path(args.basic_secret_file).resolve()}\n" + issuer)
    return (
        "# Written by .ci/oauth/exporter_e2e.py: three OAuth targets of one MCP server, no token_url;\n"
        "# the authorization server is on another origin, so each names it as its issuer.\n"
        "global:\n"
        f"  audit_interval: {INTERVAL}\n"
        f"  ping_interval: {INTERVAL}\n"
        f"  request_timeout: {INTERVAL}\n"
        "targets:\n"
        "  - name: oauth_basic\n"
        f"    url: {args.mcp}\n"
        "    oauth2:\n" + basic +
        "  - name: oauth_jwt\n"
        f"    url: {args.mcp}\n"
        "    oauth2:\n"
        f"      client_id: {args.jwt_id}\n"
        "      token_endpoint_auth_method: private_key_jwt\n"
        f"      private_key_file: {Path(args.jwt_key_file).resolve()}\n"
        "      signature_algorithm: RS256\n"
        f"      scopes: [{SCOPE}]\n" + issuer +
        "  - name: oauth_legacy\n"
        f"    url: {args.mcp}\n"
        "    protocol_version: 2025-11-25\n"
        "    oauth2:\n" + basic
    )


FAILURE_COUNTERS = [
    "mcp_probe_tools_list_walk_failures_total",
    "mcp_probe_session_failures_total",
    "mcp_probe_ping_failures_total",
    "mcp_probe_auth_failures_total",
]


class Counted(Exception):
    """A failure already counted: counters only grow, so waiting longer cannot help."""


def failures(snap: Snapshot) -> list[str]:
    problems = []
    for t in TARGETS:
        for name in FAILURE_COUNTERS:
            if snap.sum(name, target=t) != 0:
                bad = [f"{ls} {v:g}" for n, ls, v in snap.samples if n == name and ls.get("target") == t and v]
                problems.append(f"{t}: {name} {bad}")
        failed = snap.sum("mcp_probe_auth_token_requests_total", target=t, result="failure")
        if failed:
            problems.append(f"{t}: mcp_probe_auth_token_requests_total{{result=\"failure\"}} = {failed:g}")
    return problems


def steady_problems(snap: Snapshot) -> list[str]:
    """What must hold in every sample from the first up on."""
    return [f"{t}: mcp_probe_up is {snap.value('mcp_probe_up', target=t)}"
            for t in TARGETS if snap.value("mcp_probe_up", target=t) != 1] + failures(snap)


def ready_problems(snap: Snapshot) -> list[str]:
    counted = failures(snap)
    if counted:
        raise Counted("failures while the targets come up (1):\n  " + "\n  ".join(counted))
    problems = steady_problems(snap)
    for t in TARGETS:
        if snap.value("mcp_probe_ready", target=t) != 1:
            problems.append(f"{t}: mcp_probe_ready is {snap.value('mcp_probe_ready', target=t)}")
        if snap.value("mcp_probe_tools", target=t, connection="0", view="server") != 3:
            problems.append(f"{t}: mcp_probe_tools{{view=server}} is "
                            f"{snap.value('mcp_probe_tools', target=t, connection='0', view='server')}, want 3")
        if snap.sum("mcp_probe_auth_token_requests_total", target=t, result="success") < 1:
            problems.append(f"{t}: no mcp_probe_auth_token_requests_total{{result=\"success\"}} yet")
    return problems


AS_TOKEN = re.compile(r"^AS token client_id=(\S+) aud=(\S+) scope=(\S+) expires_in=(\d+)$")


def as_lines(path: str, skip: int) -> list[str]:
    return Path(path).read_text(errors="replace").splitlines()[skip:]


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--work", "--bin", "--mcp", "--issuer", "--basic-id", "--basic-secret-file", "--jwt-id", "--jwt-key-file",
              "--as-log", "--rs-log"):
        ap.add_argument(a, required=True)
    ap.add_argument("--ttl", type=int, required=True)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cfg = work / "mcp_exporter.yml"
    cfg.write_text(config(args))
    ids = {"basic": args.basic_id, "jwt": args.jwt_id}

    r = subprocess.run([args.bin, "--config.check", f"--config.file={cfg}"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise Failure(f"the exporter refuses {cfg} (exit {r.returncode}): {(r.stderr or r.stdout).strip()[:1500]}\n"
                      "  (expected until the exporter has issue 11's oauth2 support: see docs/interop.md)")
    log(f"config {cfg} accepted by --config.check")

    as_skip = len(as_lines(args.as_log, 0))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start("exporter", [args.bin, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{port}"], work)
    wait_port("exporter", port, proc, 30)
    started = time.monotonic()
    first = wait_until("every target up and ready with 3 tools, no failure (1)", 60, base, ready_problems)
    log(f"ready {time.monotonic() - started:.1f} s after start")

    window = 4 * args.ttl + 2
    log(f"watching for {window} s ({window / args.ttl:.1f} token lifetimes of {args.ttl} s)")
    expiries: dict[str, set[float]] = {t: set() for t in TARGETS}
    end = time.monotonic() + window
    samples = 0
    last = first
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Failure(f"the exporter exited with {proc.returncode} during the window")
        snap = Snapshot(base)
        samples += 1
        now = time.time()
        problems = steady_problems(snap)
        for t in TARGETS:
            if snap.sum("mcp_probe_sessions_started_total", target=t) != first.sum("mcp_probe_sessions_started_total", target=t):
                problems.append(f"{t}: mcp_probe_sessions_started_total went from "
                                f"{first.sum('mcp_probe_sessions_started_total', target=t):g} to "
                                f"{snap.sum('mcp_probe_sessions_started_total', target=t):g} (a reconnect)")
            # Absent is not wrong in itself (no token held at that instant); the count below is.
            exp = snap.value("mcp_probe_auth_token_expiry_timestamp_seconds", target=t)
            if exp is not None and exp > now + args.ttl + 2:
                problems.append(f"{t}: token expiry {exp:.0f} is {exp - now:.1f} s ahead, the AS gives {args.ttl} s")
            elif exp is not None:
                expiries[t].add(exp)
        if problems:
            raise Failure(f"(2) {time.monotonic() - started:.1f} s after start, sample {samples}:\n  " + "\n  ".join(problems))
        last = snap
        time.sleep(0.5)

    problems = []
    summary = []
    for t in TARGETS:
        got = (last.sum("mcp_probe_auth_token_requests_total", target=t, result="success")
               - first.sum("mcp_probe_auth_token_requests_total", target=t, result="success"))
        audits = (last.sum("mcp_probe_tools_list_walks_total", target=t, trigger="audit")
                  - first.sum("mcp_probe_tools_list_walks_total", target=t, trigger="audit"))
        if got < 3:
            problems.append(f"{t}: {got:g} successful token requests in the window, want >= 3")
        if len(expiries[t]) < 3:
            problems.append(f"{t}: {len(expiries[t])} distinct token expiries seen, want >= 3")
        if audits < 3:
            problems.append(f"{t}: {audits:g} audit walks in the window, want >= 3")
        summary.append(f"{t}: +{got:g} tokens, {len(expiries[t])} expiries seen, +{audits:g} audits, 0 failures")
    issued = {cid: 0 for cid in ids.values()}
    for line in as_lines(args.as_log, as_skip):
        if line.startswith("AS refused"):
            problems.append(f"the AS refused a token request: {line}")
        m = AS_TOKEN.match(line)
        if m:
            if m.group(2) != args.mcp or m.group(3) != SCOPE:
                problems.append(f"the AS issued a token for aud={m.group(2)} scope={m.group(3)}, "
                                f"want aud={args.mcp} scope={SCOPE}: {line}")
            issued[m.group(1)] = issued.get(m.group(1), 0) + 1
    for kind, cid in ids.items():
        if issued.get(cid, 0) < 3:
            problems.append(f"the AS log shows {issued.get(cid, 0)} tokens for {cid} ({kind}), want >= 3")
    if problems:
        raise Failure("(3) after the window:\n  " + "\n  ".join(problems))
    log(f"PASS: {samples} samples over {window} s, every target up; " + "; ".join(summary)
        + f"; AS issued {issued}")
    return 0


def run() -> None:
    """e2e.run (signals as exits, FAIL, log tails, children killed), with the pair's logs in the tails."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--as-log")
    ap.add_argument("--rs-log")
    logs, _ = ap.parse_known_args()
    exporter_tails = e2e.tail_logs

    def tail_logs() -> None:
        exporter_tails()
        for name, path in (("authorization server", logs.as_log), ("resource server", logs.rs_log)):
            if path and Path(path).exists():
                print(f"---- tail {name} ({path})", file=sys.stderr)
                print("\n".join(Path(path).read_text(errors="replace").splitlines()[-25:]), file=sys.stderr)

    e2e.tail_logs = tail_logs
    e2e.run(main)


if __name__ == "__main__":
    run()
