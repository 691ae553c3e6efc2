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
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { BASE_TOOLS, load, sendJson } from './kb_catalog.mjs';

const { McpServer } = await load('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { isInitializeRequest } = await load('@modelcontextprotocol/sdk/types.js');

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

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handleMcp(req, res) {
  const sid = req.headers['mcp-session-id'];
  let body;
  if (req.method === 'POST') {
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return sendJson(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    }
  }
  if (sid) {
    const entry = sessions.get(sid);
    if (!entry) return sendJson(res, 404, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
    return entry.transport.handleRequest(req, res, body);
  }
  if (req.method === 'POST' && isInitializeRequest(body)) {
    const { server, legacyTool, v2Tool } = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, { transport, legacyTool, v2Tool }),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return transport.handleRequest(req, res, body);
  }
  return sendJson(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: No valid session ID provided' } });
}

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
const stop = () => {
  for (const { transport } of sessions.values()) transport.close().catch(() => {});
  httpServer.closeAllConnections?.();
  httpServer.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
