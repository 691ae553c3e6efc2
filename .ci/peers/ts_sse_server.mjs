// An HTTP+SSE (2024-11-05 transport) MCP server on the TypeScript SDK 1.x (@modelcontextprotocol/sdk
// 1.32: low-level `Server` + `SSEServerTransport`, one server per SSE connection).
//
// `GET /sse` opens the stream; its first event is `endpoint` (data: `/messages?sessionId=<uuid>`);
// `POST /messages?sessionId=...` carries client messages (202, replies on the stream as `message`
// events). `tools.listChanged` declared; an announced swap sends list_changed on every open stream.
// `POST /mcp` is the same SDK's Streamable HTTP, stateless (a transport per request, no session, no
// GET stream): a legacy-only server, so CI can see what SDK 1.x answers to a 2026-07-28 request.
// The catalog (14 tools, --page-size, the swap) is kb_catalog.mjs's.
//
// Usage: node ts_sse_server.mjs PORT [--page-size 8] [--swap-after S] [--unannounced]
// NODE_PATH=<prefix>/node_modules resolves the SDK.
import http from 'node:http';
import { Catalog, load, parseArgs, sendJson, serveHttp } from './kb_catalog.mjs';

const { Server } = await load('@modelcontextprotocol/sdk/server/index.js');
const { SSEServerTransport } = await load('@modelcontextprotocol/sdk/server/sse.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { ListToolsRequestSchema, CallToolRequestSchema, ErrorCode, McpError } = await load('@modelcontextprotocol/sdk/types.js');

const args = parseArgs(process.argv.slice(2));
const catalog = new Catalog(args.pageSize, (msg) => new McpError(ErrorCode.InvalidParams, msg));
const connections = new Map(); // sessionId -> { server, transport }

catalog.announcers.push(async () => {
  let sent = 0;
  for (const [id, { server }] of connections) {
    try {
      await server.sendToolListChanged();
      sent += 1;
    } catch (e) {
      console.error(`dropping ${id}: ${e}`);
      connections.delete(id);
    }
  }
  return sent;
});

function newServer() {
  const server = new Server({ name: 'ci-ts-sse', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.setRequestHandler(ListToolsRequestSchema, async (request) => catalog.page(request.params?.cursor));
  server.setRequestHandler(CallToolRequestSchema, async (request) => catalog.call(request.params.name));
  return server;
}

async function openStream(req, res) {
  const server = newServer();
  const transport = new SSEServerTransport('/messages', res);
  connections.set(transport.sessionId, { server, transport });
  res.on('close', () => connections.delete(transport.sessionId));
  await server.connect(transport);
}

async function statelessMcp(req, res) {
  const server = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    transport.close().catch(() => {});
    server.close().catch(() => {});
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

async function post(req, res, url) {
  const entry = connections.get(url.searchParams.get('sessionId') || '');
  if (!entry) return sendJson(res, 404, { error: 'unknown session' });
  return entry.transport.handlePostMessage(req, res);
}

await serveHttp(http, args, catalog, 'ci-ts-sse', (req, res, url) => {
  if (req.method === 'GET' && url.pathname === '/sse') return openStream(req, res);
  if (req.method === 'POST' && url.pathname === '/messages') return post(req, res, url);
  if (url.pathname === '/mcp') return statelessMcp(req, res);
  return sendJson(res, 404, { error: 'not found' });
}, () => ({ sessions: connections.size }));
