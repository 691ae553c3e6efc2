"""An OAuth-protected MCP server for CI: the official Python SDK (PyPI `mcp`, pinned in
.ci/peers/install.sh) as an OAuth 2.0 resource server of the authorization server in as.mjs.

Why the SDK's own auth rather than a hand-written check: what the exporter must cope with is
what deployed MCP servers send — the SDK's 401 with `WWW-Authenticate: Bearer error=...,
resource_metadata="..."`, its Protected Resource Metadata (RFC 9728) at
/.well-known/oauth-protected-resource/mcp, its 403 `insufficient_scope`, and its refusal of a token
issued for another resource (`validate_token_resource`). The only code of ours is the
TokenVerifier the SDK asks for: it introspects every token at the AS (RFC 7662, as client
`mcp-rs`), so a token is refused the moment the AS says it has expired, and caches nothing.

Tools: `whoami` (read-only: the client and the expiry of the token that called it), `echo`, and
`add`; both eras are served on the one URL, as by every `mcp` 2.x server.

Usage: python rs.py --port PORT --issuer http://127.0.0.1:ASPORT --rs-secret-file F
Serves http://127.0.0.1:PORT/mcp; prints `RS mcp=URL prm=URL issuer=URL` on stdout once listening,
then `RS introspected client_id=.. aud=.. exp=..` the first time the AS vouches for a token (the
SDK may still refuse it, for its audience or scope) and `RS refused reason=..` for each one the
AS does not vouch for (CI counts these lines).
"""

from __future__ import annotations

import argparse
import base64
import logging
import sys
import time

import anyio
import httpx2
import mcp_types as types
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

SCOPE = "mcp:tools"
RS_CLIENT_ID = "mcp-rs"


def say(line: str) -> None:
    print(line, flush=True)


class IntrospectingVerifier:
    """A TokenVerifier (the SDK's protocol) that asks the AS about every token (RFC 7662)."""

    def __init__(self, issuer: str, resource: str, secret: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self.basic = "Basic " + base64.b64encode(f"{RS_CLIENT_ID}:{secret}".encode()).decode()
        self.endpoint: str | None = None
        self.seen: set[str] = set()
        self.http = httpx2.AsyncClient(timeout=5.0, trust_env=False)  # loopback: never a proxy

    async def introspection_endpoint(self) -> str:
        if self.endpoint is None:
            r = await self.http.get(f"{self.issuer}/.well-known/openid-configuration")
            r.raise_for_status()
            meta = r.json()
            if meta.get("issuer") != self.issuer:
                raise RuntimeError(f"AS metadata issuer {meta.get('issuer')!r} is not {self.issuer!r}")
            self.endpoint = meta["introspection_endpoint"]
        return self.endpoint

    def refuse(self, reason: str) -> None:
        say(f"RS refused reason={reason}")

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            r = await self.http.post(
                await self.introspection_endpoint(),
                data={"token": token, "token_type_hint": "access_token"},
                headers={"Authorization": self.basic, "Accept": "application/json"},
            )
        except httpx2.HTTPError as exc:
            self.refuse(f"introspection_unreachable ({exc})")
            return None
        if r.status_code != 200:
            self.refuse(f"introspection_http_{r.status_code}")
            return None
        info = r.json()
        if not info.get("active"):
            self.refuse("inactive")  # expired, unknown or revoked: all the AS says is active=false
            return None
        if info.get("iss") != self.issuer:
            self.refuse(f"issuer {info.get('iss')!r}")
            return None
        aud = info.get("aud")
        auds = aud if isinstance(aud, list) else [aud] if aud else []
        resource = self.resource if self.resource in auds else (auds[0] if auds else None)
        if token not in self.seen:
            self.seen.add(token)
            say(f"RS introspected client_id={info.get('client_id')} aud={aud} scope={info.get('scope')} exp={info.get('exp')}")
        return AccessToken(
            token=token,
            client_id=info.get("client_id", ""),
            scopes=(info.get("scope") or "").split(),
            expires_at=info.get("exp"),
            resource=resource,
            subject=info.get("sub"),
            claims={"iss": info["iss"]},
        )


def build(issuer: str, mcp_url: str, secret: str) -> MCPServer:
    server = MCPServer(
        "ci-oauth-rs",
        version="1.0.0",
        token_verifier=IntrospectingVerifier(issuer, mcp_url, secret),
        # Strings, not AnyHttpUrl: the settings keep a path-less issuer without a trailing slash
        # only when they parse it themselves, and the PRM must name the issuer exactly as the AS
        # metadata does (RFC 8414 compares issuers as strings).
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=mcp_url,
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
    def whoami() -> str:
        """The OAuth client that called, and when its token expires (Unix seconds)."""
        token = get_access_token()
        if token is None:
            return "anonymous"
        return f"{token.client_id} exp={token.expires_at}"

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    def echo(text: str) -> str:
        """Answers the text it was given."""
        return text

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    return server


async def serve(app, port: int, banner: str) -> None:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or server.should_exit:
                raise SystemExit(f"rs.py: uvicorn did not start on 127.0.0.1:{port}")
            await anyio.sleep(0.05)
        say(banner)


def main() -> None:
    p = argparse.ArgumentParser(description="OAuth-protected MCP server (PyPI mcp, TokenVerifier by introspection)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--issuer", required=True, help="the AS issuer, e.g. http://127.0.0.1:PORT (no trailing slash)")
    p.add_argument("--rs-secret-file", required=True, help="client_secret of mcp-rs at the AS (introspection)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with open(args.rs_secret_file, encoding="utf-8") as f:
        secret = f.read().rstrip("\r\n")
    mcp_url = f"http://127.0.0.1:{args.port}/mcp"
    app = build(args.issuer, mcp_url, secret).streamable_http_app(host="127.0.0.1")
    prm = build_resource_metadata_url(AnyHttpUrl(mcp_url))
    anyio.run(serve, app, args.port, f"RS mcp={mcp_url} prm={prm} issuer={args.issuer} scope={SCOPE}")


if __name__ == "__main__":
    main()
