// Prompts, resources and a resource template on the TypeScript SDK 1.x high-level `McpServer`
// (@modelcontextprotocol/sdk 1.32) over a stateful `StreamableHTTPServerTransport`, the way the
// SDK's README shows it: one McpServer and one transport per session, nothing tuned. A real peer for
// .ci/lists_peers_e2e.py (issue 26). McpServer declares `prompts.listChanged` and
// `resources.listChanged` as soon as one is registered.
//
// The lists are lists_catalog.mjs's. `POST /admin/remove?announce=1` removes the prompt
// `kb_legacy_digest` and the resource `kb://articles/retired` the SDK's way, on every session's
// server: `prompt.remove()` and `resource.remove()` (each sends its list's list_changed on that
// session's GET stream). `?announce=0` removes them silently: the entries are deleted from each
// McpServer's registry (`_registeredPrompts`, `_registeredResources`), which is what remove() does
// minus the notification. Sessions opened later get the lists without them. `GET /admin/state`.
//
// Usage: node ts_lists_server.mjs PORT      (MCP at http://127.0.0.1:PORT/mcp)
// NODE_PATH=<prefix>/node_modules resolves the SDK.
import http from 'node:http';
import { load, sendJson } from './kb_catalog.mjs';
import { REMOVED_PROMPT, REMOVED_RESOURCE, registerLists, state } from './lists_catalog.mjs';
import { sessionHandler, stopOnSignals } from './v1_sessions.mjs';

const { McpServer, ResourceTemplate } = await load('@modelcontextprotocol/sdk/server/mcp.js');

let removed = false;
const sessions = new Map(); // session id -> { transport, server, handles }

const handleMcp = sessionHandler(sessions, () => {
  const server = new McpServer({ name: 'ci-ts-lists', version: '1.0.0' });
  return { server, handles: registerLists(server, ResourceTemplate, removed) };
});

function remove(announce) {
  if (removed) return 0;
  removed = true;
  let n = 0;
  for (const { server, handles } of sessions.values()) {
    if (announce) {
      handles.prompt.remove(); // notifications/prompts/list_changed
      handles.resource.remove(); // notifications/resources/list_changed
    } else {
      delete server._registeredPrompts[REMOVED_PROMPT];
      delete server._registeredResources[REMOVED_RESOURCE];
    }
    n += 1;
  }
  console.error(`removed ${REMOVED_PROMPT} and ${REMOVED_RESOURCE} on ${n} session(s), announce=${announce}`);
  return n;
}

const port = Number(process.argv[2]);
const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url || '/', 'http://127.0.0.1');
  let done;
  if (url.pathname === '/mcp') done = handleMcp(req, res);
  else if (req.method === 'POST' && url.pathname === '/admin/remove') {
    const announce = url.searchParams.get('announce') !== '0';
    const sessionsChanged = remove(announce);
    done = Promise.resolve(sendJson(res, 200, { ...state(removed), announced: announce, sessions_changed: sessionsChanged }));
  } else if (req.method === 'GET' && url.pathname === '/admin/state') {
    done = Promise.resolve(sendJson(res, 200, { ...state(removed), sessions: sessions.size }));
  } else done = Promise.resolve(sendJson(res, 404, { error: 'not found' }));
  done.catch((e) => {
    console.error(e);
    if (!res.headersSent) sendJson(res, 500, { error: String(e) });
  });
});
httpServer.listen(port, '127.0.0.1', () => console.error(`ci-ts-lists listening on http://127.0.0.1:${port}/mcp`));
stopOnSignals(httpServer, sessions);
