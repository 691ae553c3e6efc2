// A paginating MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x, the
// low-level `Server` with `StreamableHTTPServerTransport`, one transport per session), a real peer
// for .ci/sdk_peers_e2e.sh.
//
// 14 tools served 5 per page behind opaque cursors, `tools.listChanged` declared, `kb_stats`
// annotated readOnlyHint: true (answers "ok"). `POST /admin/change` swaps `search_legacy` for
// `search_v2` (or back) and sends `notifications/tools/list_changed` on every session's GET stream.
//
// Usage: node ts_sdk_server.mjs PORT        (listens on 127.0.0.1:PORT, MCP at /mcp)
// Resolve the SDK with NODE_PATH=<prefix>/node_modules (npm install --prefix <prefix>).
import http from 'node:http';
import { BASE_TOOLS, load, sendJson } from './kb_catalog.mjs';
import { sessionHandler, stopOnSignals } from './v1_sessions.mjs';

const { Server } = await load('@modelcontextprotocol/sdk/server/index.js');
const { ListToolsRequestSchema, CallToolRequestSchema, ErrorCode, McpError } = await load(
  '@modelcontextprotocol/sdk/types.js'
);

const PAGE_SIZE = 5;
const state = { swapped: false, generation: 0 };
const sessions = new Map(); // session id -> { server, transport }

const names = () => [...BASE_TOOLS, state.swapped ? 'search_v2' : 'search_legacy'];
const toolDef = (name) => ({
  name,
  description: `${name} on the knowledge base`,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
  annotations: { readOnlyHint: name === 'kb_stats', destructiveHint: name !== 'kb_stats' },
});
const encodeCursor = (offset) =>
  Buffer.from(JSON.stringify({ o: offset, g: state.generation })).toString('base64url');
const decodeCursor = (cursor) => {
  try {
    const o = JSON.parse(Buffer.from(cursor, 'base64url').toString()).o;
    if (Number.isInteger(o) && o >= 0) return o;
  } catch {}
  throw new McpError(ErrorCode.InvalidParams, `unknown cursor ${JSON.stringify(cursor)}`);
};

function newServer() {
  const server = new Server(
    { name: 'ci-ts-sdk', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } }
  );
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const cursor = request.params?.cursor;
    const offset = cursor ? decodeCursor(cursor) : 0;
    const all = names();
    const next = offset + PAGE_SIZE;
    const result = { tools: all.slice(offset, next).map(toolDef) };
    if (next < all.length) result.nextCursor = encodeCursor(next);
    return result;
  });
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    if (!names().includes(name)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    return { content: [{ type: 'text', text: name === 'kb_stats' ? 'ok' : `${name} done` }] };
  });
  return server;
}

const handleMcp = sessionHandler(sessions, () => ({ server: newServer() }));

async function handleAdmin(req, res) {
  if (req.method === 'POST' && req.url === '/admin/change') {
    state.swapped = !state.swapped;
    state.generation += 1;
    let notified = 0;
    for (const [id, { server }] of sessions) {
      try {
        await server.sendToolListChanged();
        notified += 1;
      } catch (e) {
        console.error(`session ${id}: ${e}`);
      }
    }
    return sendJson(res, 200, { tools: names(), notified, generation: state.generation });
  }
  if (req.method === 'GET' && req.url === '/admin/state') {
    return sendJson(res, 200, { tools: names(), sessions: sessions.size, generation: state.generation });
  }
  return sendJson(res, 404, { error: 'not found' });
}

const port = Number(process.argv[2]);
const httpServer = http.createServer((req, res) => {
  const path = (req.url || '').split('?')[0];
  const handler = path === '/mcp' ? handleMcp : path.startsWith('/admin/') ? handleAdmin : null;
  if (!handler) return sendJson(res, 404, { error: 'not found' });
  handler(req, res).catch((e) => {
    console.error(e);
    if (!res.headersSent) sendJson(res, 500, { error: String(e) });
  });
});
httpServer.listen(port, '127.0.0.1', () => console.log(`ci-ts-sdk listening on http://127.0.0.1:${port}/mcp`));
stopOnSignals(httpServer, sessions);
