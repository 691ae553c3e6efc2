// Prompts, resources and a resource template on the TypeScript SDK v2 (@modelcontextprotocol/server
// 2.4) with its defaults: the high-level `McpServer` from a per-request factory, served by
// `createMcpHandler(factory)` with no options (so `legacy: 'stateless'`, the in-memory event bus,
// no cache hints) through @modelcontextprotocol/node's `toNodeHandler`. A real peer for
// .ci/lists_peers_e2e.py (issue 26).
//
// The lists are lists_catalog.mjs's. Each request gets a fresh McpServer registering the lists as
// they are now, so a registration handle's `remove()` has no lasting effect here (the SDK's model
// keeps state outside the instance): `POST /admin/remove?announce=1` drops the prompt
// `kb_legacy_digest` and the resource `kb://articles/retired` from that state and calls
// `handler.notify.promptsChanged()` and `handler.notify.resourcesChanged()` (every open
// `subscriptions/listen` stream that asked for the list); `?announce=0` drops them silently.
// `GET /admin/state` shows the lists.
//
// Usage: node ts2_lists_server.mjs PORT      (MCP at http://127.0.0.1:PORT/mcp)
// NODE_PATH=<prefix>/node_modules resolves the packages.
import http from 'node:http';
import { load, sendJson } from './kb_catalog.mjs';
import { registerLists, state } from './lists_catalog.mjs';

const { McpServer, ResourceTemplate, createMcpHandler } = await load('@modelcontextprotocol/server');
const { toNodeHandler } = await load('@modelcontextprotocol/node');

let removed = false;
const factory = () => {
  const server = new McpServer({ name: 'ci-ts2-lists', version: '1.0.0' });
  registerLists(server, ResourceTemplate, removed);
  return server;
};
const handler = createMcpHandler(factory);
const nodeHandler = toNodeHandler(handler);

const port = Number(process.argv[2]);
const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url || '/', 'http://127.0.0.1');
  let done;
  if (url.pathname === '/mcp') done = Promise.resolve(nodeHandler(req, res));
  else if (req.method === 'POST' && url.pathname === '/admin/remove') {
    const announce = url.searchParams.get('announce') !== '0';
    const changed = !removed;
    removed = true;
    if (changed && announce) {
      handler.notify.promptsChanged();
      handler.notify.resourcesChanged();
    }
    console.error(`removed=${changed}, announce=${announce}`);
    done = Promise.resolve(sendJson(res, 200, { ...state(removed), announced: announce, changed }));
  } else if (req.method === 'GET' && url.pathname === '/admin/state') {
    done = Promise.resolve(sendJson(res, 200, state(removed)));
  } else done = Promise.resolve(sendJson(res, 404, { error: 'not found' }));
  done.catch((e) => {
    console.error(e);
    if (!res.headersSent) sendJson(res, 500, { error: String(e) });
  });
});
httpServer.listen(port, '127.0.0.1', () => console.error(`ci-ts2-lists listening on http://127.0.0.1:${port}/mcp`));
const stop = () => {
  httpServer.closeAllConnections?.();
  httpServer.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
