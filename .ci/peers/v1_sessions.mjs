// Sessions over the TypeScript SDK 1.x `StreamableHTTPServerTransport` the way the SDK's README
// serves them: one server and one transport per session, the session found by `Mcp-Session-Id`,
// a new one opened by an `initialize` POST without it. Shared by the 1.x peers that are stateful
// (ts_sdk_server.mjs, ts_mcpserver_default.mjs, ts_lists_server.mjs): they differ in the server
// they open per session and in what their admin routes change, not in this plumbing.
//
// NODE_PATH=<prefix>/node_modules resolves the SDK (see kb_catalog.mjs's `load`).
import { randomUUID } from 'node:crypto';
import { load, sendJson } from './kb_catalog.mjs';

const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { isInitializeRequest } = await load('@modelcontextprotocol/sdk/types.js');

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// The handler of `/mcp`. `sessions` maps a session id to `{ transport, ...open() }`; `open()`
// makes a new session's `{ server, ... }` (what the peer keeps of it besides the transport).
export function sessionHandler(sessions, open) {
  return async function handleMcp(req, res) {
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
      const session = open();
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, { transport, ...session }),
        onsessionclosed: (id) => sessions.delete(id),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await session.server.connect(transport);
      return transport.handleRequest(req, res, body);
    }
    return sendJson(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: No valid session ID provided' } });
  };
}

// Close every session's transport and the HTTP server on SIGTERM or SIGINT.
export function stopOnSignals(httpServer, sessions) {
  const stop = () => {
    for (const { transport } of sessions.values()) transport.close().catch(() => {});
    httpServer.closeAllConnections?.();
    httpServer.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
