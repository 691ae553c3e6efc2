// A real MCP client on the official TypeScript SDK 1.x (`Client` + `StreamableHTTPClientTransport`
// of @modelcontextprotocol/sdk), used the way correct and careless assistants use it.
//
// Why: the proxy of `mcp_exporter proxy` measures what real clients do with the tool list; its
// end-to-end test (.ci/proxy_e2e.py) drives it with the SDK's own client, not an imitation: the
// handshake, the GET stream, the session id and the DELETE at the end are the SDK's.
//
// Modes (the server is a kb peer: 14 tools (--tools), 8 per page, a swap of search_legacy for
// search_v2):
//   correct     listTools following every nextCursor, call kb_stats; after the swap wait for
//               notifications/tools/list_changed, re-list every page, call search_v2 and kb_stats
//   relist      correct with a server that cannot announce: list every page, call kb_stats; once
//               told (the --go file) re-list every page, print `relisted {json}` (with `at`, the
//               wall-clock time in s the re-list ended), then call kb_stats only
//   first-page  one listTools() without a cursor (8 of 14 tools), then call kb_search
//   cached      list every page, then after the swap call search_legacy from that cached list;
//               `called_at` is when that call returned (wall clock, s)
//   reconnect   list every page in a first session and end it; after the swap open a new session
//               and call kb_stats without listing
//   heal        a long-lived correct client (.ci/proxy_heal_e2e.py): list every page, then every
//               0.5 s call search_legacy while its latest listing has it, kb_stats otherwise; each
//               list_changed (on its GET stream) makes it re-list every page; stops when the --go
//               file appears; `result` has every list_changed, re-list and search_legacy call (the
//               JSON-RPC error code, if any) with wall-clock times (s)
//   ignore      list every page; once told (--go) call search_legacy 3 times, 0.5 s apart, from
//               that list (list_changed heard, counted, ignored); `result` as heal's
//
// Protocol (as .ci/peers/py_client.py): prints `ready {json}`, waits (bounded) for the --go file,
// prints `result {json}` and exits 0; a failure prints `error ...` and exits 1.
//
// Usage: node ts_client.mjs URL --name CLIENT_NAME --mode MODE --go FILE [--timeout 60] [--tools 14]
// NODE_PATH=<prefix>/node_modules resolves the SDK.
import { existsSync } from 'node:fs';
import { load } from './kb_catalog.mjs';

const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ToolListChangedNotificationSchema } = await load('@modelcontextprotocol/sdk/types.js');

const MAX_PAGES = 10;
const MODES = ['correct', 'relist', 'first-page', 'cached', 'reconnect', 'heal', 'ignore'];

function parse(argv) {
  const a = { url: null, name: null, mode: null, go: null, timeout: 60, tools: 14 };
  const rest = [...argv];
  while (rest.length) {
    const k = rest.shift();
    if (k === '--name') a.name = rest.shift();
    else if (k === '--mode') a.mode = rest.shift();
    else if (k === '--go') a.go = rest.shift();
    else if (k === '--timeout') a.timeout = Number(rest.shift());
    else if (k === '--tools') a.tools = Number(rest.shift());
    else if (!a.url && !k.startsWith('--')) a.url = k;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.url || !a.name || !MODES.includes(a.mode) || !a.go || !(a.timeout > 0) || !(a.tools > 0)) {
    throw new Error(`usage: URL --name NAME --mode ${MODES.join('|')} --go FILE [--timeout S] [--tools N]`);
  }
  return a;
}

const say = (kind, data) => console.log(`${kind} ${JSON.stringify(data)}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const expect = (cond, what) => {
  if (!cond) throw new Error(what);
};

async function waitFor(what, cond, deadline) {
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within the deadline`);
    await sleep(50);
  }
}

// One SDK session with a list_changed latch.
async function open(url, name) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  const state = { changed: false, changedAt: [], wake: null };
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    state.changed = true;
    state.changedAt.push(Date.now() / 1000);
    state.wake?.();
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const close = async () => {
    await transport.terminateSession().catch(() => {});
    await client.close();
  };
  return { client, state, close, protocolVersion: transport.protocolVersion };
}

async function listTools(client, follow) {
  const names = [];
  let cursor;
  let pages = 0;
  for (;;) {
    const r = await client.listTools(cursor === undefined ? undefined : { cursor });
    pages += 1;
    names.push(...r.tools.map((t) => t.name));
    cursor = r.nextCursor;
    if (!follow || cursor === undefined) return { names, pages };
    if (pages >= MAX_PAGES) throw new Error(`more than ${MAX_PAGES} pages`);
  }
}

// [isError, first text]; a JSON-RPC error (the TS server's unknown tool) is an error too.
// kb_stats takes no arguments (fastmcp's refuses any); the others a query.
async function call(client, tool) {
  try {
    const r = await client.callTool({ name: tool, arguments: tool === 'kb_stats' ? {} : { q: 'proxy e2e' } });
    const text = (r.content || []).find((c) => typeof c.text === 'string')?.text ?? '';
    return [Boolean(r.isError), text.slice(0, 200)];
  } catch (e) {
    return [true, String(e).slice(0, 200)];
  }
}

// [isError, JSON-RPC error code or null, first text or the error's message].
async function callCoded(client, tool) {
  try {
    const r = await client.callTool({ name: tool, arguments: tool === 'kb_stats' ? {} : { q: 'proxy e2e' } });
    const text = (r.content || []).find((c) => typeof c.text === 'string')?.text ?? '';
    return [Boolean(r.isError), null, text.slice(0, 200)];
  } catch (e) {
    return [true, typeof e?.code === 'number' ? e.code : null, String(e?.message ?? e).slice(0, 200)];
  }
}

// Modes heal and ignore (see the header): what the client heard, listed and called.
async function healLoop(a, s, names, deadline) {
  const out = { list_changed_at: [], relists: [], legacy_calls: [], kb_stats_calls: 0, kb_stats_errors: [] };
  const legacy = async () => {
    const [isError, code, text] = await callCoded(s.client, 'search_legacy');
    out.legacy_calls.push([Date.now() / 1000, isError, code, text]);
  };
  if (a.mode === 'ignore') {
    await waitFor('go file', () => existsSync(a.go), deadline);
    for (let i = 0; i < 3; i++) {
      if (i) await sleep(500);
      await legacy();
    }
    out.list_changed_at = [...s.state.changedAt];
    return out;
  }
  let heard = 0;
  while (!existsSync(a.go)) {
    if (Date.now() > deadline) throw new Error('the go (stop) file did not appear in time');
    if (s.state.changedAt.length > heard) {
      heard = s.state.changedAt.length;
      const l = await listTools(s.client, true);
      names = l.names;
      out.relists.push([Date.now() / 1000, l.pages, names.includes('search_legacy'), names.includes('search_v2')]);
    } else if (names.includes('search_legacy')) {
      await legacy();
    } else {
      const [isError, code, text] = await callCoded(s.client, 'kb_stats');
      out.kb_stats_calls += 1;
      if (isError || text !== 'ok') out.kb_stats_errors.push([Date.now() / 1000, code, text]);
    }
    await new Promise((resolve) => {
      const t = setTimeout(resolve, 500);
      s.state.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    s.state.wake = null;
  }
  out.list_changed_at = [...s.state.changedAt];
  return out;
}

async function run(a) {
  const deadline = Date.now() + a.timeout * 1000;
  const out = { mode: a.mode, name: a.name };
  const s = await open(a.url, a.name);
  out.protocol_version = s.protocolVersion;
  try {
    if (a.mode === 'first-page') {
      const { names, pages } = await listTools(s.client, false);
      expect(pages === 1 && names.length < a.tools, `first page: ${pages} pages, ${names.length} tools`);
      out.first_page_tools = names.length;
      out.kb_search = await call(s.client, 'kb_search');
      say('ready', out);
      await waitFor('go file', () => existsSync(a.go), deadline);
      return out;
    }
    const before = await listTools(s.client, true);
    expect(before.names.length === a.tools && before.names.includes('search_legacy'), `before the swap: ${JSON.stringify(before)}`);
    out.pages_before = before.pages;
    if (a.mode === 'heal' || a.mode === 'ignore') {
      say('ready', out);
      return { ...out, ...(await healLoop(a, s, before.names, deadline)) };
    }
    out.kb_stats_before = await call(s.client, 'kb_stats');
    expect(!out.kb_stats_before[0] && out.kb_stats_before[1] === 'ok', `kb_stats: ${out.kb_stats_before}`);
    if (a.mode === 'correct') {
      say('ready', out);
      await waitFor('go file', () => existsSync(a.go), deadline);
      await waitFor('notifications/tools/list_changed', () => s.state.changed, deadline);
      const after = await listTools(s.client, true);
      expect(after.names.length === a.tools && after.names.includes('search_v2') && !after.names.includes('search_legacy'),
        `after the swap: ${JSON.stringify(after)}`);
      out.pages_after = after.pages;
      out.search_v2 = await call(s.client, 'search_v2');
      out.kb_stats_after = await call(s.client, 'kb_stats');
      expect(!out.search_v2[0] && !out.kb_stats_after[0], `calls after the re-list: ${JSON.stringify(out)}`);
      return out;
    }
    if (a.mode === 'relist') {
      say('ready', out);
      await waitFor('go file', () => existsSync(a.go), deadline);
      const after = await listTools(s.client, true);
      expect(after.names.length === a.tools && after.names.includes('search_v2') && !after.names.includes('search_legacy'),
        `after the swap: ${JSON.stringify(after)}`);
      out.pages_after = after.pages;
      say('relisted', { at: Date.now() / 1000, pages: after.pages });
      out.kb_stats_after = await call(s.client, 'kb_stats');
      expect(!out.kb_stats_after[0] && out.kb_stats_after[1] === 'ok', `kb_stats after the re-list: ${out.kb_stats_after}`);
      return out;
    }
    if (a.mode === 'cached') {
      say('ready', out);
      await waitFor('go file', () => existsSync(a.go), deadline);
      out.search_legacy = await call(s.client, 'search_legacy');
      out.called_at = Date.now() / 1000;
      expect(out.search_legacy[0], `search_legacy after the swap should fail: ${out.search_legacy}`);
      return out;
    }
  } finally {
    await s.close();
  }
  // reconnect: the first session has ended (DELETE); a new one calls without listing
  say('ready', out);
  await waitFor('go file', () => existsSync(a.go), deadline);
  const again = await open(a.url, a.name);
  try {
    out.kb_stats_reconnected = await call(again.client, 'kb_stats');
    expect(!out.kb_stats_reconnected[0] && out.kb_stats_reconnected[1] === 'ok', `kb_stats: ${out.kb_stats_reconnected}`);
  } finally {
    await again.close();
  }
  return out;
}

let args;
try {
  args = parse(process.argv.slice(2));
} catch (e) {
  console.error(String(e.message));
  process.exit(2);
}
const backstop = setTimeout(() => {
  console.log(`error ${args.name} (${args.mode}): hard deadline of ${args.timeout + 5} s`);
  process.exit(1);
}, (args.timeout + 5) * 1000);
try {
  const out = await run(args);
  say('result', out);
  clearTimeout(backstop);
  process.exit(0);
} catch (e) {
  console.log(`error ${args.name} (${args.mode}): ${e?.stack || e}`.slice(0, 2000));
  process.exit(1);
}
