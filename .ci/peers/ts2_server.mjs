// A dual-era MCP server on the TypeScript SDK v2 (@modelcontextprotocol/server 2.4 low-level
// `Server`, served by `createMcpHandler` through @modelcontextprotocol/node's `toNodeHandler`).
//
// Modern (2026-07-28): `server/discover`, paginated `tools/list` with ttlMs/cacheScope from the
// server's `cacheHints`, and `subscriptions/listen` on the handler's in-memory bus — an announced
// swap calls `handler.notify.toolsChanged()`. Legacy requests on the same URL go to the SDK's
// default stateless fallback (`legacy: 'stateless'`): no session, GET/DELETE 405, so a legacy
// client has no channel for list_changed — the SDK's design, which this peer keeps on purpose.
// The catalog (14 tools, --page-size, the swap) is kb_catalog.mjs's.
//
// Usage: node ts2_server.mjs PORT [--page-size 8] [--swap-after S] [--unannounced]
//                                 [--ttl-ms 60000] [--cache-scope public|private]
// MCP at http://127.0.0.1:PORT/mcp. NODE_PATH=<prefix>/node_modules resolves the packages.
import http from 'node:http';
import { Catalog, load, parseArgs, sendJson, serveHttp } from './kb_catalog.mjs';

const { Server, createMcpHandler, ProtocolError, ProtocolErrorCode } = await load('@modelcontextprotocol/server');
const { toNodeHandler } = await load('@modelcontextprotocol/node');

const args = parseArgs(process.argv.slice(2));
const catalog = new Catalog(args.pageSize, (msg) => new ProtocolError(ProtocolErrorCode.InvalidParams, msg));
const hint = { ttlMs: args.ttlMs, cacheScope: args.cacheScope };

// One fresh instance per request (the SDK's model): the state lives in `catalog`.
const factory = () => {
  const server = new Server(
    { name: 'ci-ts2', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } }, cacheHints: { 'tools/list': hint, 'server/discover': hint } }
  );
  server.setRequestHandler('tools/list', async (request) => catalog.page(request.params?.cursor));
  server.setRequestHandler('tools/call', async (request) => catalog.call(request.params.name));
  return server;
};

const handler = createMcpHandler(factory, { onerror: (e) => console.error(`mcp: ${e.message}`) });
catalog.announcers.push(async () => {
  handler.notify.toolsChanged();
  return 1;
});
const nodeHandler = toNodeHandler(handler);

await serveHttp(http, args, catalog, 'ci-ts2', (req, res, url) =>
  url.pathname === '/mcp' ? nodeHandler(req, res) : sendJson(res, 404, { error: 'not found' })
);
