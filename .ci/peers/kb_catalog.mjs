// The tool catalog, CLI flags, swap schedule and HTTP plumbing shared by the TypeScript peers of
// .ci/peers/ (ts2_server.mjs: SDK v2 modern; ts_sse_server.mjs: SDK 1.x HTTP+SSE).
//
// Why shared: the peers differ only in how the SDK serves and announces; the list they serve, its
// pages, its cursors and when it changes must match kb_catalog.py exactly, so CI asserts one
// expectation against every peer. 13 `kb_*` tools plus `search_legacy`, which a swap replaces with
// `search_v2` (a second swap puts it back); `kb_stats` is read-only and answers "ok". Cursors are
// opaque base64url JSON; an undecodable one is -32602.
//
// Flags: PORT [--page-size 8] [--swap-after S] [--unannounced] [--ttl-ms 60000]
//        [--cache-scope public|private]. Admin: POST /admin/change[?announce=0], GET /admin/state.
import { createRequire } from 'node:module';

// NODE_PATH is honoured by require(), not by ESM import: resolve packages through require.resolve.
const require = createRequire(import.meta.url);
export const load = (spec) => import(require.resolve(spec));

export const BASE_TOOLS = [
  'kb_search', 'kb_get_article', 'kb_list_spaces', 'kb_create_article', 'kb_update_article',
  'kb_delete_article', 'kb_tag_article', 'kb_list_tags', 'kb_attach_file', 'kb_export_space',
  'kb_import_space', 'kb_history', 'kb_stats',
];

export function parseArgs(argv) {
  const args = { port: NaN, pageSize: 8, swapAfter: null, unannounced: false, ttlMs: 60000, cacheScope: 'public' };
  const rest = [...argv];
  while (rest.length) {
    const a = rest.shift();
    const value = () => {
      if (!rest.length) throw new Error(`${a} needs a value`);
      return rest.shift();
    };
    if (a === '--page-size') args.pageSize = Number(value());
    else if (a === '--swap-after') args.swapAfter = Number(value());
    else if (a === '--unannounced') args.unannounced = true;
    else if (a === '--ttl-ms') args.ttlMs = Number(value());
    else if (a === '--cache-scope') args.cacheScope = value();
    else if (/^\d+$/.test(a)) args.port = Number(a);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.port)) throw new Error('usage: PORT [--page-size N] [--swap-after S] [--unannounced] [--ttl-ms N] [--cache-scope public|private]');
  if (!(args.pageSize >= 1)) throw new Error('--page-size must be at least 1');
  if (!['public', 'private'].includes(args.cacheScope)) throw new Error('--cache-scope is public or private');
  return args;
}

export class Catalog {
  // invalidCursor(message) builds the SDK's -32602 error (the SDKs have different error classes).
  constructor(pageSize, invalidCursor) {
    this.pageSize = pageSize;
    this.invalidCursor = invalidCursor;
    this.swapped = false;
    this.generation = 0;
    this.announcers = []; // async () => number of recipients notified
  }

  names() {
    return [...BASE_TOOLS, this.swapped ? 'search_v2' : 'search_legacy'];
  }

  static tool(name) {
    const readOnly = name === 'kb_stats';
    return {
      name,
      description: `${name} on the knowledge base`,
      inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
      annotations: { readOnlyHint: readOnly, destructiveHint: !readOnly },
    };
  }

  page(cursor) {
    let offset = 0;
    if (cursor !== undefined && cursor !== null) {
      try {
        offset = JSON.parse(Buffer.from(cursor, 'base64url').toString()).o;
      } catch {
        offset = -1;
      }
      if (!Number.isInteger(offset) || offset < 0) throw this.invalidCursor(`Invalid cursor ${JSON.stringify(cursor)}`);
    }
    const all = this.names();
    const end = offset + this.pageSize;
    const result = { tools: all.slice(offset, end).map(Catalog.tool) };
    if (end < all.length) result.nextCursor = Buffer.from(JSON.stringify({ o: end, g: this.generation })).toString('base64url');
    return result;
  }

  call(name) {
    if (!this.names().includes(name)) return { content: [{ type: 'text', text: `Unknown tool: ${name}` }], isError: true };
    return { content: [{ type: 'text', text: name === 'kb_stats' ? 'ok' : `${name} done` }] };
  }

  async swap(announce) {
    this.swapped = !this.swapped;
    this.generation += 1;
    let notified = 0;
    if (announce) {
      for (const announcer of this.announcers) {
        try {
          notified += await announcer();
        } catch (e) {
          console.error(`announcer failed: ${e}`);
        }
      }
    }
    console.error(`swap: generation ${this.generation}, tools ${this.names().at(-1)}, announced=${announce}, notified=${notified}`);
    return notified;
  }

  scheduleSwap(args) {
    if (args.swapAfter === null) return;
    setTimeout(() => this.swap(!args.unannounced), args.swapAfter * 1000).unref();
  }

  state() {
    return { tools: this.names(), generation: this.generation, page_size: this.pageSize };
  }
}

export function sendJson(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

// Routes /admin/* to the catalog, everything else to `handler`; listens on 127.0.0.1 only.
export async function serveHttp(http, args, catalog, name, handler, extraState = () => ({})) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url || '/', 'http://127.0.0.1');
    let done;
    if (req.method === 'POST' && url.pathname === '/admin/change') {
      done = catalog.swap(url.searchParams.get('announce') !== '0').then((notified) =>
        sendJson(res, 200, { ...catalog.state(), notified }));
    } else if (req.method === 'GET' && url.pathname === '/admin/state') {
      done = Promise.resolve(sendJson(res, 200, { ...catalog.state(), ...extraState() }));
    } else {
      done = Promise.resolve(handler(req, res, url));
    }
    done.catch((e) => {
      console.error(e);
      if (!res.headersSent) sendJson(res, 500, { error: String(e) });
    });
  });
  await new Promise((resolve) => server.listen(args.port, '127.0.0.1', resolve));
  console.error(`${name} listening on http://127.0.0.1:${args.port}`);
  catalog.scheduleSwap(args);
  const stop = () => {
    server.closeAllConnections?.();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return server;
}
