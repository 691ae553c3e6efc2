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

Nothing here is secret outside the test: the suite generates the keys per run.
"""

import json
import os
import subprocess
import sys
import tempfile

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


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: conformance_auth_client.py EXPORTER_BIN [ARGS...] URL", file=sys.stderr)
        return 2
    exporter, args = sys.argv[1], sys.argv[2:]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="conformance-auth-") as tmp:
        path = os.path.join(tmp, "http_config.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"oauth2": oauth2_block(context)}, f)
        os.chmod(path, 0o600)
        return subprocess.call([exporter, "check", "--http-config", path, *args], timeout=60)


if __name__ == "__main__":
    sys.exit(main())
