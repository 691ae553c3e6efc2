// The TypeScript SDK 1.x high-level `McpServer` (@modelcontextprotocol/sdk 1.32) over a stateful
// `StreamableHTTPServerTransport`, the way the SDK's README shows it: one McpServer and one
// transport per session, `registerTool` for each tool, no paging, nothing tuned for the exporter.
// A real peer for .ci/default_peers_e2e.py.
//
// The catalog is kb_catalog.mjs's names: 13 `kb_*` tools plus `search_legacy`; `search_v2` is
// registered too but disabled at start. `POST /admin/change` makes the change the SDK's way, in two
// steps on every session's server: `search_legacy.remove()` then `search_v2.enable()`. McpServer
// sends `notifications/tools/list_changed` on each step, so a session's GET stream carries two
// list_changed back to back for one change. `GET /admin/state` shows the list and the sessions.
//
// Usage: node ts_mcpserver_default.mjs PORT      (MCP at http://127.0.0.1:PORT/mcp)
// NODE_PATH=<prefix>/node_modules resolves the SDK.
import http from 'node:http';
import { BASE_TOOLS, load, sendJson } from './kb_catalog.mjs';
import { sessionHandler, stopOnSignals } from './v1_sessions.mjs';

const { McpServer } = await load('@modelcontextprotocol/sdk/server/mcp.js');

const state = { changed: false, generation: 0 };
const sessions = new Map(); // session id -> { transport, legacyTool, v2Tool }

const text = (t) => ({ content: [{ type: 'text', text: t }] });

function newServer() {
  const server = new McpServer({ name: 'ci-ts-mcpserver-default', version: '1.0.0' });
  for (const name of BASE_TOOLS) {
    const readOnly = name === 'kb_stats';
    server.registerTool(
      name,
      { description: `${name} on the knowledge base`, annotations: { readOnlyHint: readOnly, destructiveHint: !readOnly } },
      async () => text(readOnly ? 'ok' : `${name} done`)
    );
  }
  const legacyTool = server.registerTool('search_legacy', { description: 'search_legacy on the knowledge base' },
    async () => text('search_legacy done'));
  const v2Tool = server.registerTool('search_v2', { description: 'search_v2 on the knowledge base' },
    async () => text('search_v2 done'));
  if (state.changed) legacyTool.remove();
  else v2Tool.disable();
  return { server, legacyTool, v2Tool };
}

const handleMcp = sessionHandler(sessions, newServer);

function change() {
  if (state.changed) return 0;
  state.changed = true;
  state.generation += 1;
  let sessionsTold = 0;
  for (const { legacyTool, v2Tool } of sessions.values()) {
    legacyTool.remove(); // list_changed #1
    v2Tool.enable(); // list_changed #2
    sessionsTold += 1;
  }
  console.error(`change: search_legacy.remove() then search_v2.enable() on ${sessionsTold} session(s)`);
  return sessionsTold;
}

const port = Number(process.argv[2]);
const httpServer = http.createServer((req, res) => {
  const path = (req.url || '').split('?')[0];
  let done;
  if (path === '/mcp') done = handleMcp(req, res);
  else if (req.method === 'POST' && path === '/admin/change') {
    const notified = change();
    done = Promise.resolve(sendJson(res, 200, {
      tools: [...BASE_TOOLS, state.changed ? 'search_v2' : 'search_legacy'], notified, generation: state.generation,
    }));
  } else if (req.method === 'GET' && path === '/admin/state') {
    done = Promise.resolve(sendJson(res, 200, { changed: state.changed, sessions: sessions.size, generation: state.generation }));
  } else done = Promise.resolve(sendJson(res, 404, { error: 'not found' }));
  done.catch((e) => {
    console.error(e);
    if (!res.headersSent) sendJson(res, 500, { error: String(e) });
  });
});
httpServer.listen(port, '127.0.0.1', () => console.error(`ci-ts-mcpserver-default listening on http://127.0.0.1:${port}/mcp`));
stopOnSignals(httpServer, sessions);
