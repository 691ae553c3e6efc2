#!/usr/bin/env python3
"""Run `mcp_exporter check` in a conformance `auth/*` scenario, as a pre-registered machine client.

The conformance harness runs `python3 conformance_auth_client.py EXPORTER_BIN [ARGS...] URL` with
the scenario's credentials as JSON in MCP_CONFORMANCE_CONTEXT. An operator writes the same
credentials as an `oauth2` block; this turns the context into that block (a `--http-config` file,
JSON being YAML) and runs `check` with it:

  client_secret    -> oauth2 {client_id, client_secret}      (method from the AS metadata)
  private_key_pem  -> oauth2 {client_id, token_endpoint_auth_method: private_key_jwt,
                              private_key, signature_algorithm}
  no context       -> oauth2 {client_id: conformance-preregistered, client_secret: ...}: a client
                      registered out of band (the scenarios without a context do not check the
                      client's identity at the token endpoint).

The exporter sends credentials only to an authorization server its configuration names
(`oauth2.issuer`) or one on the MCP URL's own origin (docs/security.md), and the suite runs its
authorization server on another port than the MCP server. An operator names the authorization
server the client was registered at; the suite does not say it, so this reads it where a person
would look it up: the scenario's Protected Resource Metadata at its well-known location (path-based,
then root), `authorization_servers[0]`. When none is found, no issuer is named (the exporter's
default applies and says why it refuses).

Nothing here is secret outside the test: the suite generates the keys per run.
"""

import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

PREREGISTERED_ID = "conformance-preregistered"
PREREGISTERED_SECRET = "conformance-preregistered-secret"


def oauth2_block(context: dict) -> dict:
    block = {"client_id": context.get("client_id") or PREREGISTERED_ID}
    if context.get("private_key_pem"):
        block["token_endpoint_auth_method"] = "private_key_jwt"
        block["private_key"] = context["private_key_pem"]
        block["signature_algorithm"] = context.get("signing_algorithm", "RS256")
    elif context.get("client_secret"):
        block["client_secret"] = context["client_secret"]
    elif "client_id" not in context:
        block["client_secret"] = PREREGISTERED_SECRET
    return block


def named_issuer(server_url: str) -> str | None:
    """`authorization_servers[0]` of the resource metadata at the well-known locations."""
    u = urllib.parse.urlsplit(server_url)
    origin = f"{u.scheme}://{u.netloc}"
    path = u.path.rstrip("/")
    candidates = [f"{origin}/.well-known/oauth-protected-resource{path}"] if path else []
    candidates.append(f"{origin}/.well-known/oauth-protected-resource")
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    for url in candidates:
        try:
            with direct.open(url, timeout=10) as r:
                doc = json.loads(r.read(64 * 1024))
        except (OSError, ValueError):
            continue
        servers = doc.get("authorization_servers") if isinstance(doc, dict) else None
        if isinstance(servers, list) and servers and isinstance(servers[0], str):
            return servers[0]
    return None


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: conformance_auth_client.py EXPORTER_BIN [ARGS...] URL", file=sys.stderr)
        return 2
    exporter, args = sys.argv[1], sys.argv[2:]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    block = oauth2_block(context)
    issuer = named_issuer(args[-1])
    if issuer:
        block["issuer"] = issuer
    with tempfile.TemporaryDirectory(prefix="conformance-auth-") as tmp:
        path = os.path.join(tmp, "http_config.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"oauth2": block}, f)
        os.chmod(path, 0o600)
        return subprocess.call([exporter, "check", "--http-config", path, *args], timeout=60)


if __name__ == "__main__":
    sys.exit(main())
