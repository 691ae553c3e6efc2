"""The TypeScript SDK servers' own unknown-tool answers, counted through the proxy (issue 24).

Run by .ci/proxy_e2e.sh after proxy_channels_e2e.py (same install) with the venv's python:

    python proxy_ts_unknown_e2e.py --work DIR --bin EXPORTER_BIN --node NODE --node-path DIR/node_modules

Why: `mcp_proxy_unknown_tool_answers_total` counts only the shapes docs/proxy.md lists ("The
upstream's own word: unknown-tool answers"); the Python SDK's and fastmcp's are seen on the wire in
the other proxy checks, rmcp's in `cargo test`. This one sees the two TypeScript SDKs' answers:
  ts1  @modelcontextprotocol/sdk 1.32 `McpServer` with its defaults (.ci/peers/ts_mcpserver_default.mjs,
       stateful Streamable HTTP; `/admin/change` removes search_legacy, announced with list_changed),
       driven on the legacy era: an `isError` result, text `MCP error -32602: Tool search_legacy not found`;
  ts2  @modelcontextprotocol/server 2.4 `McpServer` from `createMcpHandler` with its defaults
       (.ci/peers/ts2_default_server.mjs; `?announce=0` swaps silently), driven on the 2026-07-28
       era (server/discover, no session): a JSON-RPC error -32602 `Tool search_legacy not found`.
One exporter, one proxy in front of each (client_label clientInfo). For each, the Python SDK client
in mode `cached` (.ci/peers/py_client.py: lists every page, and after the change calls
search_legacy from that list, any list_changed ignored); the check fails unless the server's answer
is exactly the docs' shape and, within 5 s of the call's return,
`mcp_proxy_unknown_tool_answers_total{proxy,client=<its name>,tool="search_legacy"}` >= 1.

Every wait has a deadline; every child (servers, exporter, client) is killed on every exit; on
failure the logs are printed. About 10 s.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import proxy_silent_e2e as silent
import sdk_peers_e2e as base
from sdk_peers_e2e import Failure, log

base.TAG = "proxy_ts_unknown"
COUNTED_WITHIN_S = 5.0


@dataclass
class TsPeer(silent.Peer):
    code: int | None = None  # the JSON-RPC error code of the answer, None for an isError result


PEER_LIST = [
    TsPeer("ts1", "ts_mcpserver_default.mjs", "legacy", 14, "", "MCP error -32602: Tool search_legacy not found",
           "TypeScript `@modelcontextprotocol/sdk` 1.32, `McpServer`: isError result, "
           "`MCP error -32602: Tool NAME not found`", ("py",), None),
    TsPeer("ts2", "ts2_default_server.mjs", "modern", 14, "?announce=0", "Tool search_legacy not found",
           "TypeScript `@modelcontextprotocol/server` 2.4, `McpServer`: JSON-RPC error `-32602` `Tool NAME not found`",
           ("py",), -32602),
]


def scenario(args, work, base_url: str, proxy_url: str, upstream: str, peer: TsPeer) -> dict:
    c = silent.Client(args, work, proxy_url, "py", "cached", peer)
    want_version = "2026-07-28" if peer.era == "modern" else "2025-11-25"
    r = c.wait("ready", 40)
    if r.get("protocol_version") != want_version:
        raise Failure(f"{c.name}: protocol version {r.get('protocol_version')}, want {want_version}")
    answer = json.loads(base.http("POST", upstream.replace("/mcp", f"/admin/change{peer.swap}")))
    if "search_v2" not in answer["tools"]:
        raise Failure(f"{peer.proxy}: /admin/change{peer.swap} did not swap: {answer}")
    log(f"{peer.proxy}: {c.name} ready ({want_version}, {r['pages_before']} page(s)); server changed "
        f"search_legacy -> search_v2 (notified {answer.get('notified')})")
    c.go()
    result = c.wait("result", 20)
    got = (result["search_legacy"][0], result["search_legacy_code"], result["search_legacy"][1])
    want = (True, peer.code, peer.shape)
    if got != want:
        raise Failure(f"{peer.proxy}: the server answered {c.name}'s search_legacy with (isError, code, text) "
                      f"{got}, want {want} ({peer.shape_doc})")
    kind = "isError result" if peer.code is None else f"JSON-RPC error {peer.code}"
    log(f"{peer.proxy}: the server's own answer to {c.name}: {kind}, text {peer.shape!r} ({peer.shape_doc})")
    lab = dict(proxy=peer.proxy, client=c.name, tool="search_legacy")
    counted = {}

    def seen() -> list[str]:
        counted["n"] = silent.Metrics(base_url, ("mcp_proxy_unknown_tool_answers_total",)).sum(
            "mcp_proxy_unknown_tool_answers_total", **lab)
        return [] if counted["n"] >= 1 else [f"mcp_proxy_unknown_tool_answers_total{lab} = {counted['n']}"]

    silent.poll(f"{peer.proxy}: the server's unknown-tool answer counted under {c.name}", COUNTED_WITHIN_S, seen)
    c.exited(20)
    return {"client": c.name, "answer": kind, "unknown_tool_answers": counted["n"],
            "after_call_s": round(time.time() - result["called_at"], 2)}


def main() -> int:
    args = base.arguments()
    work = args.work
    ports = {p.proxy: (base.free_port(), base.free_port()) for p in PEER_LIST}  # (upstream, proxy)
    exporter_port = base.free_port()
    base_url = f"http://127.0.0.1:{exporter_port}"
    procs = {p.proxy: base.start(p.proxy, [args.node, str(base.PEERS / p.script), str(ports[p.proxy][0])], work,
                                 env={"NODE_PATH": args.node_path}) for p in PEER_LIST}
    for p in PEER_LIST:
        base.wait_port(p.proxy, ports[p.proxy][0], procs[p.proxy], 60)
    config = work / "exporter.yml"
    config.write_text("proxies:\n" + "".join(f"""\
  - name: {p.proxy}
    listen: 127.0.0.1:{ports[p.proxy][1]}
    upstream: http://127.0.0.1:{ports[p.proxy][0]}/mcp
    client_label: clientInfo
""" for p in PEER_LIST))
    exporter = silent.start_exporter(args, work, config, exporter_port)

    silent.run_scenarios(args, work, base_url, ports, PEER_LIST, exporter, scenario)
    log("PASS: the TypeScript SDK servers' own unknown-tool answers (1.32 isError, 2.4 JSON-RPC -32602) are the "
        "docs' shapes and counted per client through the proxy")
    return 0


if __name__ == "__main__":
    base.run(main)
