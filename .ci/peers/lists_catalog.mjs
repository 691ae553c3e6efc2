// The prompts, resources and resource template the TypeScript list peers serve (ts_lists_server.mjs:
// SDK 1.x; ts2_lists_server.mjs: SDK v2), the same names as py_lists_server.py, so
// .ci/lists_peers_e2e.py asserts one expectation against every peer.
//
// Registered with the high-level `McpServer` API both SDK majors share: `registerTool`,
// `registerPrompt`, `registerResource` (a fixed URI, or a `ResourceTemplate`). Each returns a
// handle with `remove()`, which McpServer follows with the list's list_changed when connected.
export const PROMPTS = ['kb_summarize', 'kb_translate', 'kb_legacy_digest'];
export const RESOURCES = { 'kb://spaces/index': 'kb_index', 'kb://articles/welcome': 'kb_welcome', 'kb://articles/retired': 'kb_retired' };
// The template's literal prefix (`kb://drafts/`) covers none of the listed resources: a client that
// reads a removed resource gets the server's not-found answer, not a template's (and the proxy,
// which never judges a URI a listed template produces, judges it stale).
export const TEMPLATE = 'kb://drafts/{slug}';
export const REMOVED_PROMPT = 'kb_legacy_digest';
export const REMOVED_RESOURCE = 'kb://articles/retired';

const text = (t) => ({ content: [{ type: 'text', text: t }] });

// Registers the lists on `server` (removed = the removal already happened: those two are left out);
// returns the handles of the two that a removal takes away.
export function registerLists(server, ResourceTemplate, removed) {
  server.registerTool('kb_stats', { description: 'Article and space counts', annotations: { readOnlyHint: true } },
    async () => text('ok'));
  const handles = {};
  for (const name of PROMPTS) {
    if (removed && name === REMOVED_PROMPT) continue;
    handles[name] = server.registerPrompt(name, { description: `${name} on the knowledge base` }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: `${name}, please.` } }],
    }));
  }
  for (const [uri, name] of Object.entries(RESOURCES)) {
    if (removed && uri === REMOVED_RESOURCE) continue;
    handles[uri] = server.registerResource(name, uri, { description: `${name} of the knowledge base`, mimeType: 'text/markdown' },
      async (u) => ({ contents: [{ uri: u.href, text: `# ${name}` }] }));
  }
  server.registerResource('kb_draft', new ResourceTemplate(TEMPLATE, { list: undefined }),
    { description: 'A draft article by slug', mimeType: 'text/markdown' },
    async (u, vars) => ({ contents: [{ uri: u.href, text: `# ${vars.slug}` }] }));
  return { prompt: handles[REMOVED_PROMPT], resource: handles[REMOVED_RESOURCE] };
}

export function state(removed) {
  return {
    prompts: PROMPTS.filter((p) => !(removed && p === REMOVED_PROMPT)),
    resources: Object.keys(RESOURCES).filter((u) => !(removed && u === REMOVED_RESOURCE)),
    resource_templates: [TEMPLATE],
  };
}
