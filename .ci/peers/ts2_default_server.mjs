// The TypeScript SDK v2 (@modelcontextprotocol/server 2.4) with its defaults: the high-level
// `McpServer` from a per-request factory, served by `createMcpHandler(factory)` with no options
// (so `legacy: 'stateless'`, the in-memory event bus, no cache hints) through
// @modelcontextprotocol/node's `toNodeHandler`. A real peer for .ci/default_peers_e2e.py, which asks
// what the exporter makes of a server run the way the SDK's documentation shows, with a config of
// just `url`.
//
// The catalog is kb_catalog.mjs's names: 13 `kb_*` tools plus `search_legacy`. `POST
// /admin/change?announce=1` swaps `search_legacy` for `search_v2` (or back) and calls
// `handler.notify.toolsChanged()` (every open `subscriptions/listen` stream); `?announce=0` swaps
// silently. `GET /admin/state` shows the list.
//
// Usage: node ts2_default_server.mjs PORT      (MCP at http://127.0.0.1:PORT/mcp)
// NODE_PATH=<prefix>/node_modules resolves the packages.
import http from 'node:http';
import { BASE_TOOLS, load, sendJson } from './kb_catalog.mjs';

const { McpServer, createMcpHandler } = await load('@modelcontextprotocol/server');
const { toNodeHandler } = await load('@modelcontextprotocol/node');

const state = { search: 'search_legacy', generation: 0 };
const names = () => [...BASE_TOOLS, state.search];
const text = (t) => ({ content: [{ type: 'text', text: t }] });

// One fresh instance per request (the SDK's model): it registers the list as it is now.
const factory = () => {
  const server = new McpServer({ name: 'ci-ts2-default', version: '1.0.0' });
  for (const name of names()) {
    const readOnly = name === 'kb_stats';
    server.registerTool(
      name,
      { description: `${name} on the knowledge base`, annotations: { readOnlyHint: readOnly, destructiveHint: !readOnly } },
      async () => text(readOnly ? 'ok' : `${name} done`)
    );
  }
  return server;
};

const handler = createMcpHandler(factory);
const nodeHandler = toNodeHandler(handler);

const port = Number(process.argv[2]);
const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url || '/', 'http://127.0.0.1');
  let done;
  if (url.pathname === '/mcp') done = Promise.resolve(nodeHandler(req, res));
  else if (req.method === 'POST' && url.pathname === '/admin/change') {
    const announce = url.searchParams.get('announce') !== '0';
    state.search = state.search === 'search_legacy' ? 'search_v2' : 'search_legacy';
    state.generation += 1;
    if (announce) handler.notify.toolsChanged();
    console.error(`swap: generation ${state.generation}, ${state.search}, announced=${announce}`);
    done = Promise.resolve(sendJson(res, 200, { tools: names(), generation: state.generation, notified: announce ? 1 : 0 }));
  } else if (req.method === 'GET' && url.pathname === '/admin/state') {
    done = Promise.resolve(sendJson(res, 200, { tools: names(), generation: state.generation }));
  } else done = Promise.resolve(sendJson(res, 404, { error: 'not found' }));
  done.catch((e) => {
    console.error(e);
    if (!res.headersSent) sendJson(res, 500, { error: String(e) });
  });
});
httpServer.listen(port, '127.0.0.1', () => console.error(`ci-ts2-default listening on http://127.0.0.1:${port}/mcp`));
const stop = () => {
  httpServer.closeAllConnections?.();
  httpServer.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
