"""Proves the OAuth pair of .ci/oauth (as.mjs + rs.py) works, with a plain client and no exporter.

Why: the exporter's OAuth run (.ci/oauth_e2e.sh) can only be judged when the servers are known to
be right; this does, step by step and with the standard library (plus PyJWT for the
private_key_jwt assertion), what an MCP client with client credentials does, and fails naming the
step and what was seen:

 1. POST /mcp without a token: 401, `WWW-Authenticate: Bearer` with `resource_metadata`;
 2. GET that Protected Resource Metadata (RFC 9728): `resource` is the MCP URL, one
    authorization server, `scopes_supported`;
 3. the AS metadata, in the MCP order for an issuer without a path (RFC 8414, then OpenID
    Connect discovery): `issuer` exactly as the PRM names it, a token endpoint,
    client_credentials, both client authentication methods;
 4. for each client (client_secret_basic, private_key_jwt): a token by client_credentials with
    `resource` = the PRM's resource and the PRM's scopes; `expires_in` is the configured TTL;
 5. with it: initialize (2025-11-25), tools/list (whoami, echo, add), tools/call whoami (names the
    client);
 6. the RS checks what it must: a token without `resource` (no audience) is refused with 401, one
    without the scope with 403 insufficient_scope; the AS refuses an unknown resource
    (invalid_target) and an assertion replayed (invalid_client);
 7. past the token's expiry (waited for by the clock, bounded): the same session's tools/list is
    refused with 401 and a `resource_metadata` challenge; a new token makes it pass again on the
    same session (the session outlives the token).

Usage: python check_server_side.py --mcp URL --ttl S --basic-id ID --basic-secret-file F
                                    --jwt-id ID --jwt-key-file F.pem
Exit 0 and a PASS summary, or exit 1 and `FAIL: step: detail`.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import jwt  # PyJWT, a dependency of the `mcp` package in the same venv

HTTP_TIMEOUT = 10
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
LEGACY = "2025-11-25"


class Failure(Exception):
    pass


def say(line: str) -> None:
    print(f"[oauth-check] {line}", flush=True)


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None):
    """(status, headers, body bytes); HTTP errors are answers here, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with DIRECT.open(req, timeout=HTTP_TIMEOUT) as r:
            return r.status, r.headers, r.read(1 << 20)
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read(1 << 20)
    except OSError as e:
        raise Failure(f"{method} {url}: {e}") from e


def get_json(step: str, url: str) -> dict:
    status, _, body = http("GET", url, headers={"Accept": "application/json"})
    if status != 200:
        raise Failure(f"{step}: GET {url} answered {status}: {body[:300]!r}")
    return json.loads(body)


def challenge_params(value: str | None) -> dict:
    """The auth-params of a `Bearer` challenge (RFC 6750 §3), keys lower-cased."""
    if not value or not value.lower().startswith("bearer"):
        return {}
    return {k.lower(): v for k, v in re.findall(r'([A-Za-z_]+)="([^"]*)"', value)}


class Mcp:
    """A legacy (2025-11-25) Streamable HTTP session, JSON or SSE answers, bearer token swappable."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token, self.session, self.next_id = url, token, None, 1

    def post(self, message: dict):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY,
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return http("POST", self.url, json.dumps(message).encode(), headers)

    def request(self, step: str, method: str, params: dict | None = None) -> dict:
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        status, headers, body = self.post(msg)
        if status != 200:
            raise Failure(f"{step}: {method} answered HTTP {status} ({headers.get('WWW-Authenticate')}): {body[:300]!r}")
        if self.session is None:
            self.session = headers.get("Mcp-Session-Id")
        for answer in self.messages(headers, body):
            if answer.get("id") == msg["id"]:
                if "error" in answer:
                    raise Failure(f"{step}: {method} answered a JSON-RPC error: {answer['error']}")
                return answer["result"]
        raise Failure(f"{step}: {method}: no answer with id {msg['id']} in {body[:300]!r}")

    @staticmethod
    def messages(headers, body: bytes) -> list[dict]:
        if (headers.get("Content-Type") or "").startswith("text/event-stream"):
            out = []
            for event in body.decode().split("\n\n"):
                data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
                if data:
                    out.append(json.loads(data))
            return out
        return [json.loads(body)]

    def open(self, step: str) -> None:
        result = self.request(step, "initialize", {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "oauth-check", "version": "1"},
        })
        if result.get("protocolVersion") != LEGACY:
            raise Failure(f"{step}: initialize negotiated {result.get('protocolVersion')}")
        status, _, body = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise Failure(f"{step}: notifications/initialized answered {status}: {body[:200]!r}")


class Client:
    def __init__(self, name: str, client_id: str, *, secret: str | None = None, key_pem: bytes | None = None):
        self.name, self.client_id, self.secret, self.key_pem = name, client_id, secret, key_pem

    def assertion(self, audience: str) -> str:
        now = int(time.time())
        claims = {"iss": self.client_id, "sub": self.client_id, "aud": audience,
                  "jti": str(uuid.uuid4()), "iat": now, "exp": now + 60}
        return jwt.encode(claims, self.key_pem, algorithm="RS256")

    def token_request(self, meta: dict, form: dict, assertion: str | None = None):
        """(status, JSON answer) of a client_credentials request authenticated as this client."""
        form = {"grant_type": "client_credentials", **form}
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self.secret is not None:
            basic = f"{urllib.parse.quote(self.client_id, safe='')}:{urllib.parse.quote(self.secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
        else:
            form["client_id"] = self.client_id
            form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            form["client_assertion"] = assertion or self.assertion(meta["issuer"])
        status, _, body = http("POST", meta["token_endpoint"], urllib.parse.urlencode(form).encode(), headers)
        return status, json.loads(body or b"{}")

    def token(self, step: str, meta: dict, resource: str, scopes: list[str], ttl: int) -> tuple[str, float]:
        status, answer = self.token_request(meta, {"resource": resource, "scope": " ".join(scopes)})
        if status != 200 or "access_token" not in answer:
            raise Failure(f"{step}: token request of {self.client_id} answered {status}: {answer}")
        if answer.get("token_type", "").lower() != "bearer" or answer.get("expires_in") != ttl:
            raise Failure(f"{step}: token of {self.client_id}: token_type {answer.get('token_type')}, "
                          f"expires_in {answer.get('expires_in')} (want Bearer, {ttl})")
        return answer["access_token"], time.time() + answer["expires_in"]


def discover(mcp_url: str) -> tuple[dict, dict, str]:
    """Steps 1-3: (PRM, AS metadata, the metadata URL that answered)."""
    status, headers, body = Mcp(mcp_url, None).post({"jsonrpc": "2.0", "id": 0, "method": "ping"})
    challenge = headers.get("WWW-Authenticate")
    params = challenge_params(challenge)
    if status != 401 or "resource_metadata" not in params:
        raise Failure(f"1 no token: want 401 with a Bearer resource_metadata challenge, got {status} "
                      f"WWW-Authenticate={challenge!r} {body[:200]!r}")
    say(f"PASS 1 no token: 401, WWW-Authenticate: {challenge}")

    prm = get_json("2 PRM", params["resource_metadata"])
    if prm.get("resource") != mcp_url or len(prm.get("authorization_servers") or []) != 1 or not prm.get("scopes_supported"):
        raise Failure(f"2 PRM: want resource {mcp_url}, one authorization server, scopes_supported; got {prm}")
    say(f"PASS 2 PRM {params['resource_metadata']}: resource={prm['resource']} "
        f"authorization_servers={prm['authorization_servers']} scopes_supported={prm['scopes_supported']}")

    issuer = prm["authorization_servers"][0]
    parsed = urllib.parse.urlsplit(issuer)
    if parsed.path not in ("", "/"):
        raise Failure(f"3 AS metadata: this checker covers issuers without a path, not {issuer}")
    base = f"{parsed.scheme}://{parsed.netloc}"
    tried = []
    for well_known in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        status, _, body = http("GET", base + well_known, headers={"Accept": "application/json"})
        tried.append(f"{well_known} {status}")
        if status == 200:
            meta, meta_url = json.loads(body), base + well_known
            break
    else:
        raise Failure(f"3 AS metadata: no discovery document at {issuer}: {', '.join(tried)}")
    problems = []
    if meta.get("issuer") != issuer:
        problems.append(f"issuer {meta.get('issuer')!r} is not the PRM's {issuer!r} (string comparison)")
    if "client_credentials" not in meta.get("grant_types_supported", []):
        problems.append("client_credentials not in grant_types_supported")
    for method in ("client_secret_basic", "private_key_jwt"):
        if method not in meta.get("token_endpoint_auth_methods_supported", []):
            problems.append(f"{method} not in token_endpoint_auth_methods_supported")
    if not meta.get("token_endpoint"):
        problems.append("no token_endpoint")
    if problems:
        raise Failure(f"3 AS metadata at {meta_url}: " + "; ".join(problems))
    say(f"PASS 3 AS metadata {meta_url} (tried {', '.join(tried)}): issuer={meta['issuer']} "
        f"token_endpoint={meta['token_endpoint']}")
    return prm, meta, meta_url


def expect_refused(step: str, session: Mcp, status_want: int, error_want: str) -> str:
    status, headers, body = session.post({"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}})
    challenge = headers.get("WWW-Authenticate")
    params = challenge_params(challenge)
    if status != status_want or params.get("error") != error_want or "resource_metadata" not in params:
        raise Failure(f"{step}: want {status_want} error={error_want} with resource_metadata, got {status} "
                      f"WWW-Authenticate={challenge!r} {body[:200]!r}")
    return challenge


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mcp", required=True)
    p.add_argument("--ttl", type=int, required=True)
    p.add_argument("--basic-id", required=True)
    p.add_argument("--basic-secret-file", required=True)
    p.add_argument("--jwt-id", required=True)
    p.add_argument("--jwt-key-file", required=True)
    args = p.parse_args()
    with open(args.basic_secret_file, encoding="utf-8") as f:
        secret = f.read().rstrip("\r\n")
    with open(args.jwt_key_file, "rb") as f:
        key = f.read()
    clients = [Client("client_secret_basic", args.basic_id, secret=secret),
               Client("private_key_jwt", args.jwt_id, key_pem=key)]
    started = time.monotonic()
    try:
        prm, meta, _ = discover(args.mcp)
        resource, scopes = prm["resource"], prm["scopes_supported"]

        sessions, expiries = {}, {}
        for c in clients:
            token, expiry = c.token(f"4 token ({c.name})", meta, resource, scopes, args.ttl)
            session = Mcp(args.mcp, token)
            session.open(f"5 initialize ({c.name})")
            tools = sorted(t["name"] for t in session.request(f"5 tools/list ({c.name})", "tools/list")["tools"])
            if tools != ["add", "echo", "whoami"]:
                raise Failure(f"5 tools/list ({c.name}): want add, echo, whoami; got {tools}")
            who = session.request(f"5 tools/call ({c.name})", "tools/call", {"name": "whoami", "arguments": {}})
            text = who["content"][0]["text"]
            if not text.startswith(c.client_id + " "):
                raise Failure(f"5 tools/call whoami ({c.name}): want {c.client_id}, got {text!r}")
            sessions[c.name], expiries[c.name] = session, expiry
            say(f"PASS 4+5 {c.name} ({c.client_id}): token expires_in={args.ttl}s, session "
                f"{session.session}, tools {tools}, whoami -> {text!r}")

        basic, signed = clients
        status, answer = basic.token_request(meta, {"scope": " ".join(scopes)})
        if status != 200:
            raise Failure(f"6 token without resource: the AS refused it ({status} {answer}); want a token with no audience")
        challenge = expect_refused("6 token without resource at the RS", Mcp(args.mcp, answer["access_token"]), 401, "invalid_token")
        say(f"PASS 6 a token without `resource` (no audience) is refused: 401 {challenge}")
        status, answer = basic.token_request(meta, {"resource": resource})
        if status != 200:
            raise Failure(f"6 token without scope: the AS refused it ({status} {answer})")
        challenge = expect_refused("6 token without scope at the RS", Mcp(args.mcp, answer["access_token"]), 403, "insufficient_scope")
        say(f"PASS 6 a token without the scope is refused: 403 {challenge}")
        other = urllib.parse.urlsplit(resource)._replace(path="/other").geturl()
        status, answer = basic.token_request(meta, {"resource": other, "scope": " ".join(scopes)})
        if status != 400 or answer.get("error") != "invalid_target":
            raise Failure(f"6 unknown resource {other}: want 400 invalid_target, got {status} {answer}")
        replayed = signed.assertion(meta["issuer"])
        first, _ = signed.token_request(meta, {"resource": resource, "scope": " ".join(scopes)}, replayed)
        again, answer = signed.token_request(meta, {"resource": resource, "scope": " ".join(scopes)}, replayed)
        if first != 200 or again != 401 or answer.get("error") != "invalid_client":
            raise Failure(f"6 replayed client assertion: want 200 then 401 invalid_client, got {first} then {again} {answer}")
        say("PASS 6 the AS refuses an unknown resource (invalid_target) and a replayed assertion (invalid_client)")

        # 7: wait for the clock to pass the later expiry (bounded by the TTL itself).
        wait = max(expiries.values()) - time.time() + 1.5
        if wait > args.ttl + 2:
            raise Failure(f"7 expiry: would wait {wait:.1f} s for a {args.ttl} s token")
        say(f"waiting {max(wait, 0):.1f} s for both tokens to expire")
        time.sleep(max(wait, 0))
        for c in clients:
            session = sessions[c.name]
            challenge = expect_refused(f"7 expired token ({c.name})", session, 401, "invalid_token")
            session.token, _ = c.token(f"7 new token ({c.name})", meta, resource, scopes, args.ttl)
            session.request(f"7 tools/list with the new token ({c.name})", "tools/list")
            say(f"PASS 7 {c.name}: expired token refused (401 {challenge}); a new token serves the same session")
    except Failure as exc:
        print(f"FAIL: {exc}", file=sys.stderr, flush=True)
        return 1
    say(f"server side OK: 7 steps passed for both clients in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
